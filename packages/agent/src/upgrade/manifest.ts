import { AgentPackageManifest } from "@keelson/protocol";

/**
 * The agent package format (docs/agent-package.md): a gzipped tarball whose root holds
 * `manifest.json` and the files it lists. The manifest names the package, its version, the
 * entry file the launcher runs with node, and the sha256 of every other file, so a package is
 * checked file by file after unpacking and not only as a whole. Schema and checks live in
 * packages/protocol, shared with the control plane, which verifies uploads the same way.
 */
export {
  AGENT_MANIFEST_FILE as MANIFEST_FILE,
  AGENT_MANIFEST_FORMAT as MANIFEST_FORMAT,
  AGENT_PACKAGE_NAME as PACKAGE_NAME,
} from "@keelson/protocol";
export const PackageManifest = AgentPackageManifest;
export type PackageManifest = AgentPackageManifest;

export {
  PackageError as ManifestError,
  sha256File,
  verifyAgentPackageDir as verifyPackageDir,
} from "@keelson/protocol";
