import { readFileSync } from "node:fs";

/** This CLI's version (`keelson --version`): its package's, which a release sets. */
export const CLI_VERSION: string =
  (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: string }).version ??
  "0.0.0";
