import { readFileSync } from "node:fs";

/**
 * Replaced by scripts/pack-agent.ts (an esbuild `define`) with the version written in the
 * package's manifest, so an installed package reports exactly the version it was built as.
 */
declare const __KEELSON_AGENT_VERSION__: string | undefined;

function workspaceVersion(): string {
  // Running from the workspace sources: the agent package's own version.
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: string };
  return pkg.version ?? "0.0.0";
}

export const AGENT_VERSION: string =
  typeof __KEELSON_AGENT_VERSION__ === "string" ? __KEELSON_AGENT_VERSION__ : workspaceVersion();
