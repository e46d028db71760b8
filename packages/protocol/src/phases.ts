import { type Static, Type } from "typebox";

/**
 * The node-phase catalogue (spec §4.9): the 21 phases a node runs, in order. Ids are stable
 * wire names (the agent reports them, the control plane stores and shows them); names are for
 * people. Masters run all 21; workers skip the etcd phases, the node bouncer, the app catalog,
 * keepalived and coredns (15). `drain-pods` is stop-only: start and status pass over it.
 */

export const NODE_ROLES = ["master", "worker"] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

export interface PhaseDefinition {
  id: string;
  name: string;
  /** 1-based position in the full (master) list; gaps appear in a worker's list. */
  order: number;
  roles: readonly NodeRole[];
  /** Run only when stopping (drain): start and status skip it. */
  stopOnly: boolean;
}

const BOTH = NODE_ROLES;
const MASTER = ["master"] as const;

export const PHASES = [
  { id: "gen-certs", name: "Generate certificates / send signing request", order: 1, roles: BOTH, stopOnly: false },
  { id: "prepare-config", name: "Prepare configuration", order: 2, roles: BOTH, stopOnly: false },
  { id: "configure-runtime", name: "Configure container runtime", order: 3, roles: BOTH, stopOnly: false },
  { id: "start-runtime", name: "Start container runtime", order: 4, roles: BOTH, stopOnly: false },
  { id: "load-user-images", name: "Load user images", order: 5, roles: BOTH, stopOnly: false },
  { id: "configure-etcd", name: "Configure etcd", order: 6, roles: MASTER, stopOnly: false },
  { id: "start-etcd", name: "Start etcd", order: 7, roles: MASTER, stopOnly: false },
  { id: "network-config", name: "Network configuration", order: 8, roles: BOTH, stopOnly: false },
  { id: "configure-cni", name: "Configure CNI plugin", order: 9, roles: BOTH, stopOnly: false },
  { id: "node-bouncer", name: "Configure and start the node bouncer", order: 10, roles: MASTER, stopOnly: false },
  { id: "misc-checks", name: "Miscellaneous scripts and checks", order: 11, roles: BOTH, stopOnly: false },
  { id: "kubelet", name: "Configure and start kubelet", order: 12, roles: BOTH, stopOnly: false },
  { id: "kube-proxy", name: "Configure and start kube-proxy", order: 13, roles: BOTH, stopOnly: false },
  { id: "wait-for-services", name: "Wait for services and network", order: 14, roles: BOTH, stopOnly: false },
  { id: "node-taints", name: "Apply and validate node taints", order: 15, roles: BOTH, stopOnly: false },
  {
    id: "dynamic-kubelet-config",
    name: "Apply dynamic kubelet configuration",
    order: 16,
    roles: BOTH,
    stopOnly: false,
  },
  { id: "uncordon", name: "Uncordon node", order: 17, roles: BOTH, stopOnly: false },
  { id: "app-catalog", name: "Deploy app catalog", order: 18, roles: MASTER, stopOnly: false },
  { id: "keepalived", name: "Configure and start keepalived", order: 19, roles: MASTER, stopOnly: false },
  { id: "coredns", name: "Configure and start coredns", order: 20, roles: MASTER, stopOnly: false },
  { id: "drain-pods", name: "Drain all pods", order: 21, roles: BOTH, stopOnly: true },
] as const satisfies readonly PhaseDefinition[];

export type PhaseId = (typeof PHASES)[number]["id"];
export const PHASE_IDS: readonly PhaseId[] = PHASES.map((p) => p.id);

const BY_ID = new Map<string, PhaseDefinition>(PHASES.map((p) => [p.id, p]));

export function isPhaseId(value: unknown): value is PhaseId {
  return typeof value === "string" && BY_ID.has(value);
}

export function phaseDefinition(id: PhaseId): PhaseDefinition {
  return BY_ID.get(id)!;
}

/** The phases a node of `role` runs, ascending (stop-only ones included). */
export function phasesForRole(role: NodeRole): PhaseDefinition[] {
  return PHASES.filter((p) => (p.roles as readonly NodeRole[]).includes(role));
}

export const PHASE_STATES = ["not-started", "executing", "running", "stopped", "failed"] as const;
export type PhaseState = (typeof PHASE_STATES)[number];

/** Node status as the interface shows it (DESIGN.md "Operations"). */
export const NODE_PHASE_STATUSES = ["ok", "converging", "failed"] as const;
export type NodePhaseStatus = (typeof NODE_PHASE_STATUSES)[number];

const Iso = Type.Union([Type.String({ maxLength: 64 }), Type.Null()]);

/** One phase as the agent reports it and the control plane stores it (nodes.phases). */
export const PhaseStatusRecord = Type.Object(
  {
    id: Type.Enum(PHASES.map((p) => p.id) as PhaseId[]),
    name: Type.String({ maxLength: 128 }),
    order: Type.Integer({ minimum: 1, maximum: PHASES.length }),
    state: Type.Enum(PHASE_STATES),
    /** The last failure's message, kept until the phase next succeeds. */
    lastError: Type.Union([Type.String({ maxLength: 8192 }), Type.Null()]),
    /** A note that is not an error: "no VIP configured", "deprecated, does nothing". */
    message: Type.Optional(Type.Union([Type.String({ maxLength: 2048 }), Type.Null()])),
    startedAt: Iso,
    finishedAt: Iso,
    durationMs: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  },
  { additionalProperties: false },
);
export type PhaseStatusRecord = Static<typeof PhaseStatusRecord>;

/** A node's whole phase report: its status and its role's phases in order. */
export const NodePhaseReport = Type.Object(
  {
    status: Type.Enum(NODE_PHASE_STATUSES),
    phases: Type.Array(PhaseStatusRecord, { maxItems: PHASES.length }),
  },
  { additionalProperties: false },
);
export type NodePhaseReport = Static<typeof NodePhaseReport>;

/**
 * Certificate profiles the agent asks the control plane to sign. The signer decides the key
 * usages from the profile, never from the CSR, and checks the subject and SANs against the node
 * it knows; the agent only proposes them.
 */
export const CERT_PROFILES = {
  /** kubelet client (system:node:<name>) and serving cert. */
  kubelet: { usages: ["client", "server"] },
  "kube-proxy": { usages: ["client"] },
  /** apiserver serving cert: primary IP, 127.0.0.1, the service IP, VIP, kubernetes.default... */
  apiserver: { usages: ["server"] },
  /** The node bouncer's webhook serving cert. */
  bouncer: { usages: ["server"] },
  "etcd-server": { usages: ["server", "client"] },
  "etcd-peer": { usages: ["server", "client"] },
  "etcd-client": { usages: ["client"] },
  /** The apiserver's client identity towards the kubelets (--kubelet-client-certificate). */
  "apiserver-kubelet-client": { usages: ["client"] },
  /**
   * The controllers' identities towards the API server (CN system:kube-controller-manager /
   * system:kube-scheduler), also serving their health port, as kubeadm's self-signed serving
   * certificates would otherwise do.
   */
  "kube-controller-manager": { usages: ["client", "server"] },
  "kube-scheduler": { usages: ["client", "server"] },
} as const satisfies Record<string, { usages: readonly ("client" | "server")[] }>;
export type CertProfile = keyof typeof CERT_PROFILES;
export const CERT_PROFILE_NAMES = Object.keys(CERT_PROFILES) as CertProfile[];
