import type { IncomingHttpHeaders } from "node:http";
import type {
  BackupReportFrame,
  CertSignedFrame,
  CertSignFrame,
  ClusterReportFrame,
  HelloFrame,
  HostFacts,
  NodeReportFrame,
} from "@keelson/protocol";

/**
 * The one interface between the link transport (this folder: sockets, frames, sessions,
 * commands) and the domain. The hub calls the domain only through it and imports nothing
 * from domain/; the domain implements it (domain/hosts/link-domain.ts) and is handed to the
 * hub where the app is assembled (app.ts). The types below are the transport's words for
 * what it asks.
 */
export interface LinkDomain {
  /** The host credential of a link upgrade, checked before the WebSocket exists. */
  authenticate(headers: IncomingHttpHeaders): Promise<HostAuth>;
  /** Connection state and facts, written to the host records. */
  readonly presence: Presence;
  /** A node's phase report; refused when it speaks of another cluster than the node's. */
  applyNodeReport(hostId: string, frame: NodeReportFrame): Promise<ReportOutcome>;
  applyBackupReport(hostId: string, frame: BackupReportFrame): Promise<BackupOutcome>;
  /** An in-cluster agent's reading of its external cluster, kept on the registration. */
  applyClusterReport(hostId: string, frame: ClusterReportFrame): Promise<BackupOutcome>;
  /** A node certificate signed with its cluster's CA, or refused. */
  signCertificate(hostId: string, frame: CertSignFrame): Promise<CertSignedFrame>;
  /** `token.verify`: whether an API token (the admin's included) grants access to the project. */
  tokenGrantsProject(token: string, projectId: string): Promise<boolean>;
  /** `cluster-token.verify`: the subject of a kubeconfig token of the host's own cluster, or null. */
  clusterTokenSubject(hostId: string, token: string): Promise<string | null>;
}

export type HostAuth =
  | { ok: true; hostId: string; projectId: string }
  | { ok: false; status: 401; code: string; message: string };

export type ReportOutcome =
  | { stored: true }
  /** The agent spoke of another cluster than the one the control plane has the node in. */
  | { stored: false; expected: string | null };

export type BackupOutcome = { stored: true } | { stored: false; why: string };

/** Columns of a node row that the link keeps up to date. */
export interface PresencePatch {
  name?: string;
  primaryIp?: string;
  facts?: HostFacts;
  agentVersion?: string;
  agentStatus?: string;
  agentError?: string | null;
  agentConnected?: 0 | 1;
  lastSeen?: string;
  status?: string;
}

export interface Presence {
  /** Hosts marked connected whose link no replica holds (agent_links) marked not; how many. */
  resetUnlinked(): Promise<number>;
  connected(hostId: string, hello: HelloFrame, now?: Date): void;
  disconnected(hostId: string, now?: Date): void;
  change(hostId: string, patch: PresencePatch): void;
  /** A heartbeat (pong) of the host, at `nowMs` (default: now). */
  touch(hostId: string, nowMs?: number): void;
  flush(): Promise<void>;
  close(): Promise<void>;
}
