#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step for internal packages, see DESIGN.md).
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");
