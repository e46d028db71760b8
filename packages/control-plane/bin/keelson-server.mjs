#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step for internal packages, see DESIGN.md).
import { register } from "tsx/esm/api";

register();
// `keelson-server migrate-to-postgres` moves a stopped server's SQLite data; anything else starts the server.
if (process.argv[2] === "migrate-to-postgres") await import("../src/commands/migrate-to-postgres-main.ts");
else await import("../src/main.ts");
