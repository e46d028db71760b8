import { readFileSync } from "node:fs";

// Read at start, not imported: a release rewrites package.json's version after its bundle is built.
const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };

/** This keelson-server's release: the API document's version and what a schema may require (keelson_schema). */
export const SERVER_VERSION: string = manifest.version;
