import { readFileSync } from "node:fs";
import { packNode } from "../../../scripts/pack-node.ts";
import { NODE_PACKAGE } from "./node-hosts.ts";

/**
 * Builds the test node package for each role version, as `pnpm pack:node` does, and uploads it
 * to the server (`POST /v1/nodePackages`): nodes then run their cluster's version, downloaded
 * from the server. Throws with the server's answer when an upload is refused.
 */
export async function uploadNodePackages(
  serverUrl: string,
  adminToken: string,
  out: string,
  versions: readonly (readonly [roleVersion: string, kubernetesVersion: string])[],
): Promise<void> {
  for (const [roleVersion, kubernetesVersion] of versions) {
    const built = packNode({ from: NODE_PACKAGE, roleVersion, kubernetesVersion, out });
    const uploaded = await fetch(`${serverUrl}/v1/nodePackages`, {
      method: "POST",
      headers: { "x-auth-token": adminToken, "content-type": "application/octet-stream" },
      body: readFileSync(built.file),
    });
    if (uploaded.status !== 200) {
      throw new Error(`uploading node package ${roleVersion}: ${uploaded.status} ${await uploaded.text()}`);
    }
  }
}
