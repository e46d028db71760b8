/**
 * vitest globalSetup of the end-to-end projects: builds keelson-server's bundle
 * (packages/control-plane/bin/bundle.mjs) once before any file starts a server, so that no test's
 * first start also pays for a build. A start would build it itself; this moves that second ahead of the tests.
 */
import { join } from "node:path";
import { buildBundle } from "../../packages/control-plane/bin/bundle.mjs";

export default async function setup(): Promise<void> {
  await buildBundle(join(import.meta.dirname, "..", "..", "packages", "control-plane"));
}
