import type { CertProfile, PhaseId } from "@keelson/protocol";
import type { Logger } from "pino";
import type { ServiceManager } from "../services/types.ts";
import type { NodeConfig } from "./config.ts";
import type { KubeApi } from "./kube-api.ts";
import type { NodePaths } from "./paths.ts";

/**
 * Why the engine is calling a phase. `restart` is a start within the reconcile loop (reuse
 * certificates, do not bootstrap anew); `detach` is a stop that leaves the cluster for good
 * (leave etcd, wipe data); `stop` keeps everything for a later start.
 */
export type PhaseIntent = "start" | "restart" | "stop" | "detach" | "status";

export interface SignedCertificate {
  certPem: string;
  /** The cluster CA that signed it (written as ca.crt, trusted by every service). */
  caPem: string;
  /** With the apiserver certificate: the cluster's service-account signing key (one per cluster). */
  serviceAccountKeyPem?: string;
  /** With the kube-controller-manager certificate: the certificates API's signing CA (cert and key). */
  clusterSigning?: { certPem: string; keyPem: string };
}

/** Signs a CSR with the cluster CA. The control plane does it over the link; tests use a test CA. */
export type SignCsr = (csrPem: string, profile: CertProfile, signal: AbortSignal) => Promise<SignedCertificate>;

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface RunOptions {
  env?: Record<string, string>;
  input?: string;
  /** Return the result instead of throwing on a non-zero exit. */
  allowFailure?: boolean;
  timeoutMs?: number;
}

export interface PhaseContext {
  config: NodeConfig;
  paths: NodePaths;
  log: Logger;
  signal: AbortSignal;
  services: ServiceManager;
  signCsr: SignCsr;
  /** The API as this node's kubelet (system:node:<name>): what NodeRestriction lets a kubelet do. */
  kubeApi: KubeApi;
  /**
   * The API as the masters' control plane (apiserver-kubelet-client, system:masters), for what a
   * kubelet may not do (node-api.ts). Only masters hold its certificate; on a worker every call fails.
   */
  masterKubeApi: KubeApi;
  intent: PhaseIntent;
  regenerateCerts: boolean;
  /** Runs a command (clean environment plus `env`); throws with its output when it fails. */
  run(command: string, args: string[], options?: RunOptions): Promise<RunResult>;
  /** Absolute path of a node-package binary; throws naming it and where it was looked for. */
  binary(name: string, options?: { fallbackDirs?: string[] }): string;
}

/** A phase's successful result: an optional note for the operator ("no VIP: nothing to do"). */
export type PhaseOutcome = { message?: string } | undefined;

export interface Phase {
  id: PhaseId;
  start(ctx: PhaseContext): Promise<PhaseOutcome>;
  stop(ctx: PhaseContext): Promise<PhaseOutcome>;
  /** Resolves when the phase's work is in place and healthy; throws saying what is not. */
  status(ctx: PhaseContext): Promise<PhaseOutcome>;
}

export class PhaseError extends Error {
  override name = "PhaseError";
}

export class MissingBinaryError extends PhaseError {
  override name = "MissingBinaryError";
  constructor(
    readonly binary: string,
    readonly lookedIn: string[],
  ) {
    super(`required binary "${binary}" not found; looked for ${lookedIn.join(", ")}`);
  }
}
