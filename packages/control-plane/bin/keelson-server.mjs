#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step for internal packages, see DESIGN.md).
import { register } from "tsx/esm/api";

register();
// `keelson-server migrate-to-postgres|backup|restore` are the operator's commands
// (src/commands/main.ts); anything else starts the server.
if (["migrate-to-postgres", "backup", "restore"].includes(process.argv[2] ?? ""))
  await import("../src/commands/main.ts");
else await import("../src/main.ts");
