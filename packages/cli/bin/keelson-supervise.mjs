#!/usr/bin/env node
// keelson-supervise --root DIR: the process supervisor for keelson-server where systemd does not
// run (packages/cli/src/release/supervisor.ts). Started detached by `keelson install
// control-plane --root DIR` and `keelson advanced-ddu scale-du up`; `keelson stop` ends it.
import { register } from "tsx/esm/api";

register();
const { parseArgs } = await import("node:util");
const { values } = parseArgs({ options: { root: { type: "string" } } });
if (!values.root) {
  process.stderr.write("usage: keelson-supervise --root DIR\n");
  process.exit(2);
}
const { layoutOf } = await import("../src/release/layout.ts");
const { runServerSupervisor } = await import("../src/release/supervisor.ts");
process.exitCode = await runServerSupervisor(layoutOf(values.root), process.env.PATH ?? "/usr/bin:/bin");
