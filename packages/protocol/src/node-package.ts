import { type Static, Type } from "typebox";
import { AGENT_VERSION_PATTERN } from "./agent-package.ts";

/**
 * The node package manifest (docs/node-package.md): the binaries a node's phases run for one
 * kube role version. A gzipped tarball whose root holds `manifest.json`, `bin/<binary>` for
 * every binary and any support files, each listed with its sha256. The control plane stores
 * one package per role version and hands its URL and sha256 to agents with `node.join` and
 * `node.upgrade`, so an upgraded node runs the binaries of its new version.
 */
export const NODE_PACKAGE_NAME = "keelson-node";
export const NODE_MANIFEST_FILE = "manifest.json";
export const NODE_MANIFEST_FORMAT = 1;
/** Role versions become directory and file names: the same alphabet as agent versions. */
export const ROLE_VERSION_PATTERN = AGENT_VERSION_PATTERN;

export const NodeBinary = Type.Object({
  /** `real` (the upstream binary) or `stand-in` (a test double, said so plainly). */
  kind: Type.Union([Type.Literal("real"), Type.Literal("stand-in")]),
  source: Type.String({ maxLength: 512 }),
  version: Type.String({ maxLength: 128 }),
});

export const NodePackageManifest = Type.Object({
  format: Type.Literal(NODE_MANIFEST_FORMAT),
  name: Type.Literal(NODE_PACKAGE_NAME),
  /** The kube role version (catalogue) this package is for. */
  roleVersion: Type.String({ pattern: ROLE_VERSION_PATTERN }),
  kubernetesVersion: Type.String({ minLength: 1, maxLength: 128 }),
  createdAt: Type.String({ minLength: 1, maxLength: 64 }),
  binaries: Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,63}$" }), NodeBinary),
  note: Type.Optional(Type.String({ maxLength: 4096 })),
  /** Every file of the package except manifest.json, by relative path, with its sha256. */
  files: Type.Record(Type.String({ minLength: 1, maxLength: 1024 }), Type.String({ pattern: "^[0-9a-f]{64}$" })),
});
export type NodePackageManifest = Static<typeof NodePackageManifest>;

/** What an agent is handed to install a node package: where to fetch it and what it must hash to. */
export const NodePackageRef = Type.Object(
  {
    roleVersion: Type.String({ pattern: ROLE_VERSION_PATTERN }),
    /** Absolute, or relative to the agent's KEELSON_CONTROL_PLANE (the control plane serves it). */
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
  },
  { additionalProperties: false },
);
export type NodePackageRef = Static<typeof NodePackageRef>;
