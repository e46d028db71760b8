import { type Static, type TProperties, Type } from "typebox";
import { AgentUpgradeRequest } from "./agent-upgrade.ts";
import { ControlPlanePins } from "./control-plane-pins.ts";
import { NodePackageRef } from "./node-package.ts";

/**
 * Commands the control plane sends to an agent. Each has a payload schema (what the agent
 * receives) and a result schema (what a successful `result` frame carries back); both sides
 * validate against them, so adding a command here is the whole contract.
 */

const Text = (maxLength: number) => Type.String({ maxLength });

/** A payload or result: these properties and no others. */
const Exact = <const P extends TProperties>(properties: P) => Type.Object(properties, { additionalProperties: false });

/** The cluster a node command is about. */
const ClusterId = Type.String({ minLength: 1, maxLength: 128 });

/** A cluster's spec fields (domain/clusters/spec/spec.ts), as stored. */
const ClusterSettings = Type.Record(Type.String(), Type.Unknown());

export const PingPayload = Exact({});
export const PingResult = Exact({
  /** The agent's clock when it answered (ISO 8601), useful for spotting clock skew. */
  at: Text(64),
});

/** Self-upgrade request relayed from `PUT /v1/hosts/{uuid}/hostagent` (rules in agent-upgrade.ts). */
export const AgentUpgradePayload = AgentUpgradeRequest;
export const AgentUpgradeResult = Exact({
  /** True when the agent took the request; the outcome shows later in its status. */
  accepted: Type.Boolean(),
  status: Type.Union([Type.Literal("running"), Type.Literal("updating")]),
});

/** An etcd member as the joining master must list it in `initial-cluster`. */
export const EtcdMember = Exact({
  name: Type.String({ minLength: 1, maxLength: 253 }),
  peerUrl: Type.String({ minLength: 1, maxLength: 512 }),
  clientUrl: Type.String({ minLength: 1, maxLength: 512 }),
});

/**
 * Makes the host a node of a cluster (attach): the agent keeps this as its desired state
 * (surviving restarts) and runs its phases until they all run; progress arrives as
 * `node.report` frames, not in the result.
 */
export const NodeJoinPayload = Exact({
  clusterId: ClusterId,
  clusterName: Type.String({ minLength: 1, maxLength: 255 }),
  role: Type.Union([Type.Literal("master"), Type.Literal("worker")]),
  kubeRoleVersion: Text(128),
  /** The cluster's spec fields (domain/clusters/spec/spec.ts), as stored. */
  settings: ClusterSettings,
  masterVipVrouterId: Text(8),
  /** PEM of the cluster CA, which signs every node certificate. */
  caCertPem: Type.String({ minLength: 1, maxLength: 16_384 }),
  /** https://host:port of the cluster's API (VIP, DNS name or first master). */
  apiEndpoint: Text(512),
  /** Masters: the etcd members already running (empty for the first master). */
  etcdMembers: Type.Array(EtcdMember, { maxItems: 64 }),
  /**
   * The node package of `kubeRoleVersion`, when the control plane stores one; without it the
   * agent runs the package installed on the host (KEELSON_NODE_PACKAGE).
   */
  nodePackage: Type.Optional(NodePackageRef),
});
export const NodeJoinResult = Exact({ accepted: Type.Boolean() });

/**
 * Takes the host out of its cluster (detach): drain, stop the phases in descending order, on a
 * master remove its etcd member first (unless it is the last member), clean what the phases
 * wrote. Answers once the node is clean.
 */
export const NodeLeavePayload = Exact({
  clusterId: ClusterId,
  /** The cluster's last node: no drain target and no etcd member removal. */
  lastNode: Type.Boolean(),
});
export const NodeLeaveResult = Exact({ clean: Type.Boolean() });

/**
 * The cluster's settings changed (cluster update): the node keeps them in its desired state
 * (the phases use them when they next run) and re-reads what it schedules from them (etcd
 * backups). Only nodes with a live link get it; others get the settings with their next join.
 */
export const NodeSettingsPayload = Exact({
  clusterId: ClusterId,
  /** The cluster's spec fields, as `node.join` carries them. */
  settings: ClusterSettings,
});
export const NodeSettingsResult = Exact({ applied: Type.Boolean() });

/**
 * Restarts the node's phases in place (staggered restart): drain, stop every phase, start them
 * again. Certificates are kept unless `regenerateCerts`. The agent reports `converging` before
 * it answers, then its phases as they start (issue 5).
 */
export const NodeRestartPayload = Exact({
  clusterId: ClusterId,
  regenerateCerts: Type.Boolean(),
});
export const NodeRestartResult = Exact({ accepted: Type.Boolean() });

/**
 * Moves the node to another kube role version (cluster upgrade): the agent installs the node
 * package of that version first (while the old one still runs, so a failed download leaves the
 * node as it was), keeps the new version, settings and package in its desired state, and
 * restarts its phases like `node.restart` on the new package's binaries.
 */
export const NodeUpgradePayload = Exact({
  clusterId: ClusterId,
  kubeRoleVersion: Type.String({ minLength: 1, maxLength: 128 }),
  /** The cluster's spec fields after the upgrade, as stored. */
  settings: ClusterSettings,
  /** The node package of `kubeRoleVersion` (see node.join). */
  nodePackage: Type.Optional(NodePackageRef),
});
export const NodeUpgradeResult = Exact({ accepted: Type.Boolean() });

/**
 * Before an upgrade touches any node: fetch and install the node package of the target role
 * version now, while every node still runs, so a package a node cannot get stops the upgrade
 * before anything restarts, and the node's own upgrade later spends no time downloading.
 * Changes nothing the node runs.
 */
export const NodePrefetchPayload = Exact({
  clusterId: ClusterId,
  nodePackage: NodePackageRef,
});
export const NodePrefetchResult = Exact({ ready: Type.Boolean() });

/**
 * Asks a master to sweep its cluster's Nodes now rather than on its next status pass: label the
 * workers that registered, delete the Nodes that detached workers marked (a kubelet may do
 * neither). Sent when a worker waits for its role label and after workers left; only to agents
 * that declared the `node-sweep` capability.
 */
export const NodeSweepPayload = Exact({ clusterId: ClusterId });
const NodeNames = Type.Array(Type.String({ maxLength: 253 }), { maxItems: 10_000 });
export const NodeSweepResult = Exact({
  /** Nodes given the worker role label. */
  labelled: NodeNames,
  /** Nodes deleted because their host left the cluster. */
  removed: NodeNames,
});

/**
 * An image archive (an OCI or docker archive `.tar`, what `ctr images import` reads) staged on
 * the host: the agent downloads it from the control plane (`url`, relative to the control
 * plane's base URL like a node package's), checks `sha256`, keeps it as `<name>.tar` among the
 * host's user images (the "load user images" phase imports those on every start), and, when the
 * node's container runtime runs, imports it now. `images` are the names the archive carries
 * (read by the control plane at upload): the agent checks the runtime lists each of them.
 * Sent only to agents that declared the `images` capability.
 */
export const ImagesStagePayload = Exact({
  name: Type.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" }),
  url: Text(1024),
  sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
  images: Type.Array(Text(512), { minItems: 1, maxItems: 1000 }),
});
const ImageNames = Type.Array(Text(512), { maxItems: 10_000 });
export const ImagesStageResult = Exact({
  /** False when no container runtime runs on the host: the archive is imported when its node starts one. */
  imported: Type.Boolean(),
  /** The runtime's image list (`ctr -n k8s.io images ls -q`) after the import; empty when not imported. */
  listed: ImageNames,
});

/** The runtime's image list (`ctr -n k8s.io images ls -q`); refused when no runtime runs on the host. */
export const ImagesListPayload = Exact({});
export const ImagesListResult = Exact({ listed: ImageNames });

/**
 * Replaces the agent's control-plane pins (control-plane-pins.ts): the agent first checks that
 * every new address answers `/readyz` as the control plane (TLS verified against the name) and
 * refuses the whole list, keeping its pins, when one does not; then keeps them in its state dir
 * and links over them from its next connection on. An empty list removes every pin. Sent only
 * to agents that declared the `control-plane-pins` capability.
 */
export const ControlPlanePinsPayload = Exact({ pins: ControlPlanePins });
export const ControlPlanePinsResult = Exact({ pins: ControlPlanePins, previous: ControlPlanePins });

export const Commands = {
  ping: { payload: PingPayload, result: PingResult },
  "agent.upgrade": { payload: AgentUpgradePayload, result: AgentUpgradeResult },
  "node.join": { payload: NodeJoinPayload, result: NodeJoinResult },
  "node.leave": { payload: NodeLeavePayload, result: NodeLeaveResult },
  "node.settings": { payload: NodeSettingsPayload, result: NodeSettingsResult },
  "node.restart": { payload: NodeRestartPayload, result: NodeRestartResult },
  "node.upgrade": { payload: NodeUpgradePayload, result: NodeUpgradeResult },
  "node.prefetch": { payload: NodePrefetchPayload, result: NodePrefetchResult },
  "node.sweep": { payload: NodeSweepPayload, result: NodeSweepResult },
  "images.stage": { payload: ImagesStagePayload, result: ImagesStageResult },
  "images.list": { payload: ImagesListPayload, result: ImagesListResult },
  "control-plane.pins": { payload: ControlPlanePinsPayload, result: ControlPlanePinsResult },
} as const;

export type CommandName = keyof typeof Commands;
export const COMMAND_NAMES = Object.keys(Commands) as CommandName[];
export type CommandPayload<N extends CommandName> = Static<(typeof Commands)[N]["payload"]>;
export type CommandResult<N extends CommandName> = Static<(typeof Commands)[N]["result"]>;

/** Per-command default timeout when the caller gives none. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;
/** Upper bound on any command's timeout, so a pending command cannot be held forever. */
export const MAX_COMMAND_TIMEOUT_MS = 15 * 60_000;

/**
 * Codes in a failed `result`. TIMEOUT: the handler overran `timeoutMs`. UNKNOWN_COMMAND: the
 * agent has no handler, or does not know the command at all (a newer control plane's; the
 * link stays up). INTERRUPTED: the agent restarted while the command ran, so it will not
 * run it again. BAD_RESULT: the handler returned something the result schema refuses.
 * FAILED: the handler threw.
 */
export const CommandErrorCode = {
  TIMEOUT: "TIMEOUT",
  UNKNOWN_COMMAND: "UNKNOWN_COMMAND",
  INTERRUPTED: "INTERRUPTED",
  BAD_RESULT: "BAD_RESULT",
  FAILED: "FAILED",
  ABORTED: "ABORTED",
} as const;
export type CommandErrorCode = (typeof CommandErrorCode)[keyof typeof CommandErrorCode];
