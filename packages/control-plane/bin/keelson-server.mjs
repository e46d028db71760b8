#!/usr/bin/env node
// Runs the control plane from its bundle of the TypeScript sources (bundle.mjs: built here when
// the sources changed, shipped ready in a release).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { readyBundle } from "./bundle.mjs";

const bundle = readyBundle(join(import.meta.dirname, ".."));
// Stack traces name the TypeScript sources, as they did when tsx ran them.
process.setSourceMapsEnabled(true);
// `keelson-server migrate-to-postgres|backup|restore` are the operator's commands
// (src/commands/main.ts); anything else starts the server.
const entry = ["migrate-to-postgres", "backup", "restore"].includes(process.argv[2] ?? "") ? "commands" : "server";
await import(pathToFileURL(join(bundle, `${entry}.mjs`)).href);
