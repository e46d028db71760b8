#!/usr/bin/env node
// keelson-agent launcher. It runs no agent code itself: it supervises one child process running
// the installed version (<state dir>/versions/current, see docs/agent-package.md) or, when no
// version is installed, this workspace's TypeScript sources through tsx. Self-upgrade, restart
// and rollback to the previous version happen here, so they work the same under systemd and in
// tests.
import { register } from "tsx/esm/api";

register();
const { runSupervisor } = await import("../src/upgrade/supervisor.ts");
process.exitCode = await runSupervisor({ argv: process.argv.slice(2), env: process.env });
