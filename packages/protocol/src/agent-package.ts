import { type Static, Type } from "typebox";

/**
 * The agent package manifest (docs/agent-package.md): shared by the agent, which verifies a
 * package before installing it, and the control plane, which verifies one before serving it.
 * A gzipped tarball whose root holds `manifest.json` and the files it lists with their sha256.
 */
export const AGENT_PACKAGE_NAME = "keelson-agent";
export const AGENT_MANIFEST_FILE = "manifest.json";
export const AGENT_MANIFEST_FORMAT = 1;
/** Letters, digits and . + _ -: a version becomes a directory and a file name. */
export const AGENT_VERSION_PATTERN = "^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$";

export const AgentPackageManifest = Type.Object({
  format: Type.Literal(AGENT_MANIFEST_FORMAT),
  name: Type.Literal(AGENT_PACKAGE_NAME),
  version: Type.String({ pattern: AGENT_VERSION_PATTERN }),
  /** Path of the file node runs, relative to the package root. */
  entry: Type.String({ minLength: 1, maxLength: 255 }),
  /** Oldest Node.js major the package runs on. */
  nodeMajor: Type.Integer({ minimum: 1 }),
  createdAt: Type.String({ minLength: 1, maxLength: 64 }),
  /** Every file of the package except manifest.json, by relative path, with its sha256. */
  files: Type.Record(Type.String({ minLength: 1, maxLength: 1024 }), Type.String({ pattern: "^[0-9a-f]{64}$" })),
});
export type AgentPackageManifest = Static<typeof AgentPackageManifest>;
