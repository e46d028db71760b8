import { type Static, type TSchema, Type } from "typebox";
import { type CommandName, Commands } from "./commands.ts";
import { HostFacts } from "./facts.ts";
import { CERT_PROFILE_NAMES, NodePhaseReport } from "./phases.ts";

/**
 * Every frame of the agent link, as JSON text messages discriminated on `type`.
 * Agent -> control plane: hello, facts, status, result, token.verify, node.report, cert.sign,
 * cluster-token.verify, backup.report, cluster.report.
 * Control plane -> agent: welcome, command, token.verified.
 * Frames are strict (no additional properties): a field one side does not know means the
 * versions differ, and PROTOCOL_VERSION is the place to say so.
 */

const strict = { additionalProperties: false } as const;
const Id = Type.String({ minLength: 1, maxLength: 128 });
const Text = (maxLength = 255) => Type.String({ maxLength });

export const AgentStatus = Type.Union([Type.Literal("running"), Type.Literal("updating")]);
export type AgentStatus = Static<typeof AgentStatus>;

// ---- agent -> control plane -------------------------------------------------------------

export const HelloFrame = Type.Object(
  {
    type: Type.Literal("hello"),
    protocolVersion: Type.Integer({ minimum: 0 }),
    hostId: Id,
    agentVersion: Text(128),
    hostname: Type.String({ minLength: 1, maxLength: 253 }),
    primaryIp: Text(64),
    facts: HostFacts,
    agentStatus: AgentStatus,
    agentError: Type.Optional(Text(4096)),
    /**
     * What this agent takes beyond the first release of protocol 1 (AGENT_CAPABILITIES). The
     * control plane sends nothing an agent did not declare: an older agent drops its link on
     * a command or field it does not know.
     */
    capabilities: Type.Optional(Type.Array(Text(64), { maxItems: 64 })),
  },
  strict,
);

/**
 * Capabilities an agent declares in its hello. `node-packages`: `nodePackage` in node.join /
 * node.upgrade, and node.prefetch. `node-report-command`: this agent names in its node reports
 * the node.restart / node.upgrade it is carrying out, once the welcome says the control plane
 * takes the field (CONTROL_CAPABILITIES). `node-sweep`: node.sweep. `images`: images.stage and
 * images.list. `control-plane-pins`: control-plane.pins. `cluster-report`: an in-cluster agent (external cluster) that sends cluster.report
 * once the welcome says the control plane takes it; it declares nothing else (it runs no node).
 */
export const AGENT_CAPABILITIES = {
  nodePackages: "node-packages",
  reportCommand: "node-report-command",
  nodeSweep: "node-sweep",
  images: "images",
  controlPlanePins: "control-plane-pins",
  clusterReport: "cluster-report",
} as const;

/**
 * What a control plane takes beyond the first release of protocol 1, announced in the welcome
 * (only to an agent that declared the same capability: an older agent refuses a welcome with a
 * field it does not know). `node-report-command`: the `command` field of node.report.
 * `cluster-report`: the cluster.report frame.
 */
export const CONTROL_CAPABILITIES = { reportCommand: "node-report-command", clusterReport: "cluster-report" } as const;

export const FactsFrame = Type.Object({ type: Type.Literal("facts"), facts: HostFacts }, strict);

export const StatusFrame = Type.Object(
  {
    type: Type.Literal("status"),
    agentStatus: AgentStatus,
    agentVersion: Text(128),
    agentError: Type.Optional(Text(4096)),
  },
  strict,
);

export const CommandError = Type.Object({ code: Text(64), message: Text(4096) }, strict);
export type CommandError = Static<typeof CommandError>;

/** Exactly one per command id; `result` is checked against the command's result schema. */
export const ResultFrame = Type.Union([
  Type.Object({ type: Type.Literal("result"), id: Id, ok: Type.Literal(true), result: Type.Unknown() }, strict),
  Type.Object({ type: Type.Literal("result"), id: Id, ok: Type.Literal(false), error: CommandError }, strict),
]);

/** The agent asks whether an X-Auth-Token presented to its local API belongs to its project. */
export const TokenVerifyFrame = Type.Object(
  { type: Type.Literal("token.verify"), id: Id, token: Type.String({ minLength: 1, maxLength: 1024 }) },
  strict,
);

/** A master's last etcd check (agent: node/etcd-health.ts); an error counts as 0 healthy. */
export const EtcdMemberHealth = Type.Object(
  {
    /** Members in `etcdctl member list`, added-but-unstarted ones included (0: unreadable). */
    members: Type.Integer({ minimum: 0, maximum: 1024 }),
    /** Members whose client endpoint answers `etcdctl endpoint health`. */
    healthy: Type.Integer({ minimum: 0, maximum: 1024 }),
    /** When the agent ran the check (ISO 8601). */
    checkedAt: Text(64),
  },
  strict,
);

/**
 * The node's phase report, sent whenever a phase or the node status changes (masters: also
 * when their etcd health changes).
 */
export const NodeReportFrame = Type.Object(
  {
    type: Type.Literal("node.report"),
    /** The cluster the agent believes it belongs to (null once it left). */
    clusterId: Type.Union([Id, Type.Null()]),
    report: NodePhaseReport,
    /** Masters: the API server on this node answers its health check. */
    apiResponding: Type.Boolean(),
    /**
     * Masters whose start-etcd phase runs: the etcd cluster as this member sees it. Optional:
     * workers and agents older than this field send none (the control plane then judges etcd
     * by the phase alone). A rolling restart takes the next master down only once a restarted
     * master reports `healthy == members ==` the cluster's masters.
     */
    etcd: Type.Optional(EtcdMemberHealth),
    /**
     * The id of the node.restart / node.upgrade command whose work this report shows: the
     * last one the agent started in this membership (absent before the first). A rollout takes
     * a node as begun and back only from reports naming its own command, so a report from
     * before it (still on its way when the command left) is never mistaken for its end. Sent
     * only to a control plane whose welcome announced CONTROL_CAPABILITIES.reportCommand; an
     * older one refuses the field.
     */
    command: Type.Optional(Id),
  },
  strict,
);

/** The agent asks the control plane to sign a CSR with its cluster's CA. */
export const CertSignFrame = Type.Object(
  {
    type: Type.Literal("cert.sign"),
    id: Id,
    profile: Type.Enum(CERT_PROFILE_NAMES),
    csrPem: Type.String({ minLength: 1, maxLength: 16_384 }),
    dnsNames: Type.Array(Text(253), { maxItems: 32 }),
    ipAddresses: Type.Array(Text(64), { maxItems: 32 }),
  },
  strict,
);

/** The node bouncer asks whether a bearer token was issued for this node's cluster. */
export const ClusterTokenVerifyFrame = Type.Object(
  { type: Type.Literal("cluster-token.verify"), id: Id, token: Type.String({ minLength: 1, maxLength: 1024 }) },
  strict,
);

/** A master's etcd backup run (or why backups cannot be scheduled): the cluster's backup status. */
export const BackupReportFrame = Type.Object(
  {
    type: Type.Literal("backup.report"),
    clusterId: Id,
    ok: Type.Boolean(),
    error: Type.Optional(Text(4096)),
    /** The snapshot file written (ok runs), as a path on the host. */
    file: Type.Optional(Text(4096)),
    /** When the run finished (ISO 8601). */
    at: Text(64),
  },
  strict,
);

/** One Node of an external cluster as its API lists it (GET /api/v1/nodes). */
export const ClusterNode = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 253 }),
    /** From the `node-role.kubernetes.io/<role>` labels, sorted. */
    roles: Type.Array(Text(63), { maxItems: 16 }),
    /** The status of the node's Ready condition ("True", "False", "Unknown"); "Unknown" without one. */
    ready: Type.Union([Type.Literal("True"), Type.Literal("False"), Type.Literal("Unknown")]),
    kubeletVersion: Text(64),
    /** The node's InternalIP address, or null without one. */
    internalIp: Type.Union([Text(64), Type.Null()]),
  },
  strict,
);

/**
 * An in-cluster agent's reading of its external cluster's API, sent periodically and after every
 * welcome: `/version`, `/api/v1/nodes`, `/readyz`. A read that failed (the API refused the
 * service-account token, or cannot be reached) is `healthy: false` with the error, and what could
 * not be read is null.
 */
export const ClusterReportFrame = Type.Object(
  {
    type: Type.Literal("cluster.report"),
    /** `gitVersion` of GET /version. */
    kubernetesVersion: Type.Union([Text(64), Type.Null()]),
    nodes: Type.Union([Type.Array(ClusterNode, { maxItems: 5000 }), Type.Null()]),
    /** GET /readyz answered 200, and every read above succeeded. */
    healthy: Type.Boolean(),
    error: Type.Optional(Text(4096)),
    /** When the agent read the API (ISO 8601). */
    at: Text(64),
  },
  strict,
);

export const AgentFrame = Type.Union([
  HelloFrame,
  FactsFrame,
  StatusFrame,
  ResultFrame,
  TokenVerifyFrame,
  NodeReportFrame,
  CertSignFrame,
  ClusterTokenVerifyFrame,
  BackupReportFrame,
  ClusterReportFrame,
]);

// ---- control plane -> agent -------------------------------------------------------------

export const WelcomeFrame = Type.Object(
  {
    type: Type.Literal("welcome"),
    protocolVersion: Type.Integer({ minimum: 0 }),
    hostId: Id,
    projectId: Id,
    /** The control plane pings this often; an agent that hears nothing for ~2.5x reconnects. */
    heartbeatMs: Type.Integer({ minimum: 1 }),
    /** CONTROL_CAPABILITIES the agent declared too; absent for every other agent (see there). */
    capabilities: Type.Optional(Type.Array(Text(64), { maxItems: 64 })),
  },
  strict,
);

function commandFrame<N extends CommandName>(name: N) {
  return Type.Object(
    {
      type: Type.Literal("command"),
      id: Id,
      name: Type.Literal(name),
      payload: Commands[name].payload as (typeof Commands)[N]["payload"],
      timeoutMs: Type.Integer({ minimum: 1 }),
    },
    strict,
  );
}

/** One variant per command so `payload` narrows with `name`. */
export const CommandFrame = Type.Union([
  commandFrame("ping"),
  commandFrame("agent.upgrade"),
  commandFrame("node.join"),
  commandFrame("node.leave"),
  commandFrame("node.settings"),
  commandFrame("node.restart"),
  commandFrame("node.upgrade"),
  commandFrame("node.prefetch"),
  commandFrame("node.sweep"),
  commandFrame("images.stage"),
  commandFrame("images.list"),
  commandFrame("control-plane.pins"),
]);

export const TokenVerifiedFrame = Type.Object(
  { type: Type.Literal("token.verified"), id: Id, valid: Type.Boolean() },
  strict,
);

export const CertSignedFrame = Type.Union([
  Type.Object(
    {
      type: Type.Literal("cert.signed"),
      id: Id,
      ok: Type.Literal(true),
      certPem: Type.String({ maxLength: 16_384 }),
      caCertPem: Type.String({ maxLength: 16_384 }),
      /** With a master's apiserver certificate: the cluster's service-account signing key (PKCS#8). */
      serviceAccountKeyPem: Type.Optional(Type.String({ maxLength: 16_384 })),
      /**
       * With a master's kube-controller-manager certificate: the cluster's signing CA for the
       * certificates API (--cluster-signing-cert-file/-key-file), an intermediate of the cluster CA.
       */
      clusterSigning: Type.Optional(
        Type.Object(
          { certPem: Type.String({ maxLength: 16_384 }), keyPem: Type.String({ maxLength: 16_384 }) },
          strict,
        ),
      ),
    },
    strict,
  ),
  Type.Object({ type: Type.Literal("cert.signed"), id: Id, ok: Type.Literal(false), error: CommandError }, strict),
]);

export const ClusterTokenVerifiedFrame = Type.Object(
  {
    type: Type.Literal("cluster-token.verified"),
    id: Id,
    /** Who the token was issued to, or null when it is not valid for this node's cluster. */
    subject: Type.Union([Text(255), Type.Null()]),
  },
  strict,
);

export const ControlFrame = Type.Union([
  WelcomeFrame,
  CommandFrame,
  TokenVerifiedFrame,
  CertSignedFrame,
  ClusterTokenVerifiedFrame,
]);

// ---- static types -----------------------------------------------------------------------

export type HelloFrame = Static<typeof HelloFrame>;
export type FactsFrame = Static<typeof FactsFrame>;
export type StatusFrame = Static<typeof StatusFrame>;
export type ResultFrame = Static<typeof ResultFrame>;
export type TokenVerifyFrame = Static<typeof TokenVerifyFrame>;
export type AgentFrame = Static<typeof AgentFrame>;
export type WelcomeFrame = Static<typeof WelcomeFrame>;
export type CommandFrame = Static<typeof CommandFrame>;
export type TokenVerifiedFrame = Static<typeof TokenVerifiedFrame>;
export type ControlFrame = Static<typeof ControlFrame>;
export type NodeReportFrame = Static<typeof NodeReportFrame>;
export type EtcdMemberHealth = Static<typeof EtcdMemberHealth>;
export type CertSignFrame = Static<typeof CertSignFrame>;
export type ClusterTokenVerifyFrame = Static<typeof ClusterTokenVerifyFrame>;
export type BackupReportFrame = Static<typeof BackupReportFrame>;
export type ClusterReportFrame = Static<typeof ClusterReportFrame>;
export type ClusterNode = Static<typeof ClusterNode>;
export type CertSignedFrame = Static<typeof CertSignedFrame>;
export type ClusterTokenVerifiedFrame = Static<typeof ClusterTokenVerifiedFrame>;
export type AgentFrameType = AgentFrame["type"];
export type ControlFrameType = ControlFrame["type"];

/** The hello without its `type` and `protocolVersion`, which the link client fills in. */
export type HelloPayload = Omit<HelloFrame, "type" | "protocolVersion">;

/** Variant schemas by `type`, used to explain why a frame was refused. */
export const AGENT_FRAME_SCHEMAS: Readonly<Record<AgentFrameType, TSchema>> = {
  hello: HelloFrame,
  facts: FactsFrame,
  status: StatusFrame,
  result: ResultFrame,
  "token.verify": TokenVerifyFrame,
  "node.report": NodeReportFrame,
  "cert.sign": CertSignFrame,
  "cluster-token.verify": ClusterTokenVerifyFrame,
  "backup.report": BackupReportFrame,
  "cluster.report": ClusterReportFrame,
};
export const CONTROL_FRAME_SCHEMAS: Readonly<Record<ControlFrameType, TSchema>> = {
  welcome: WelcomeFrame,
  command: CommandFrame,
  "token.verified": TokenVerifiedFrame,
  "cert.signed": CertSignedFrame,
  "cluster-token.verified": ClusterTokenVerifiedFrame,
};

/** Compile-time exhaustiveness check for `switch (frame.type)`. */
export function assertNever(value: never, what = "frame"): never {
  throw new Error(`unhandled ${what}: ${JSON.stringify(value)}`);
}
