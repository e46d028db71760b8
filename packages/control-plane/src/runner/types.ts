import type { Db, operations } from "@keelson/db";
import type { StepBatch } from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";

export type OperationRow = typeof operations.$inferSelect;
export type OperationState = OperationRow["state"];

export interface StepContext {
  readonly op: OperationRow;
  readonly db: Db;
  readonly log: FastifyBaseLogger;
  /** Aborted when the control plane shuts down: long waits must give up and let the step re-run on resume. */
  readonly signal: AbortSignal;
  /** The fence of this replica's claim (leases.ts): commands the step sends carry it (node-link.ts). */
  readonly fence: number;
  /** Progress inside a step (for example the nodes a rollout already finished), kept across restarts. */
  readonly progress: Record<string, unknown>;
  saveProgress(patch: Record<string, unknown>): Promise<void>;
  /** Tells the event stream that a batch of this step started or is done (`operation.step` with `batch`). */
  announceBatch(batch: StepBatch): void;
}

export interface OperationStep {
  /** Stable name, stored in the cursor: renaming a step breaks resume of older operations. */
  readonly name: string;
  /** Must be idempotent: a step interrupted by a crash runs again from its start. */
  run(ctx: StepContext): Promise<void> | void;
}

export interface OperationKind {
  readonly kind: string;
  /** A promise where the steps' code is loaded on first use (the AWS kinds: aws/load.ts says why). */
  steps(op: OperationRow): readonly OperationStep[] | Promise<readonly OperationStep[]>;
  /**
   * Progress carries from one step to the next instead of starting empty at each: for kinds
   * whose later steps need what earlier ones learnt (the ids of an auto deploy's cloud resources).
   */
  readonly keepProgress?: boolean;
  /** Records the failure on the target (cluster taskStatus/taskError and the like). */
  onFailed?(ctx: StepContext, error: Error): void | Promise<void>;
}

/** Thrown by a step that was interrupted by shutdown; the operation stays `running` and resumes. */
export class OperationInterrupted extends Error {
  constructor() {
    super("interrupted by shutdown");
    this.name = "OperationInterrupted";
  }
}

export interface OperationEvent {
  type: "operation.started" | "operation.step" | "operation.finished";
  operationId: string;
  projectId: string;
  kind: string;
  targetId: string;
  state: OperationState;
  step?: string;
  /** operation.step of a rollout batch; without it, the named step is done. */
  batch?: StepBatch;
  error?: string | null;
  /** operation.finished: from its first start (before any restart of the control plane) to its end. */
  durationMs?: number;
}
