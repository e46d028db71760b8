import { EventEmitter } from "node:events";
import {
  type NodePhaseReport,
  type NodePhaseStatus,
  type NodeRole,
  type PhaseDefinition,
  type PhaseId,
  type PhaseState,
  type PhaseStatusRecord,
  phasesForRole,
} from "@keelson/protocol";
import type { Logger } from "pino";
import { isNoSpace } from "../services/atomic-file.ts";
import type { ServiceManager } from "../services/types.ts";
import type { NodeConfig } from "./config.ts";
import { buildContext, type ContextParts } from "./context.ts";
import { type SweepResult, sweepNodes } from "./impl/node-sweep.ts";
import { listImages, loadUserImages } from "./impl/runtime.ts";
import { createKubeApi, type KubeApi } from "./kube-api.ts";
import { type NodePaths, nodePaths } from "./paths.ts";
import { loadPhaseState, type PersistedPhaseState, savePhaseState } from "./state-file.ts";
import type { Phase, PhaseIntent, PhaseOutcome, SignCsr } from "./types.ts";

/**
 * Runs a node's phases: start ascending from a phase, stop descending down to one, status
 * ascending up to the first failure. One operation at a time (they queue). Every state change
 * is written to the state file (atomically) and emitted as `change` with the whole list, which
 * is what the link reports to the control plane.
 */

export interface PhaseEngineOptions {
  config: NodeConfig;
  /** Implementations by id; the engine runs the ones the node's role needs. */
  phases: Phase[];
  stateFile: string;
  log: Logger;
  services: ServiceManager;
  signCsr: SignCsr;
  /** Default: the apiserver of the node config with the kubelet's credentials. */
  kubeApi?: KubeApi;
  /** Default: the same apiserver with a master's control-plane credentials (types.ts). */
  masterKubeApi?: KubeApi;
  /** Upper bound on one phase call (start, stop or status). */
  phaseTimeoutMs?: number;
  onChange?: (phases: PhaseStatusRecord[]) => void;
  now?: () => Date;
}

export interface EngineResult {
  ok: boolean;
  /** The first phase that failed. */
  failed?: PhaseId;
  error?: string;
}

export interface StartOptions {
  from?: PhaseId;
  regenerateCerts?: boolean;
  intent?: Extract<PhaseIntent, "start" | "restart">;
}

export interface StopOptions {
  to?: PhaseId;
  intent?: Extract<PhaseIntent, "stop" | "detach">;
  /** Leave out stop-only phases (drain): a self-repair should not evict the node's workloads. */
  skipStopOnly?: boolean;
}

export interface PhaseEngineEvents {
  change: [PhaseStatusRecord[]];
  "node-status": [NodePhaseStatus];
}

const MAX_ERROR = 8000;

export class PhaseEngine extends EventEmitter<PhaseEngineEvents> {
  readonly role: NodeRole;
  readonly definitions: PhaseDefinition[];
  readonly paths: NodePaths;
  private readonly impls = new Map<PhaseId, Phase>();
  private readonly records = new Map<PhaseId, PhaseStatusRecord>();
  private readonly kubeApi: KubeApi;
  private readonly masterKubeApi: KubeApi;
  private readonly now: () => Date;
  private nodeStatusValue: NodePhaseStatus = "converging";
  private queue: Promise<unknown> = Promise.resolve();
  private abortController = new AbortController();
  /** The last save of the phase states found no space (logged once per stretch). */
  private persistRefused = false;

  constructor(private readonly options: PhaseEngineOptions) {
    super();
    this.role = options.config.role;
    this.definitions = phasesForRole(this.role);
    this.paths = nodePaths(options.config.hostRoot);
    this.now = options.now ?? (() => new Date());
    for (const phase of options.phases) this.impls.set(phase.id, phase);
    const missing = this.definitions.filter((d) => !this.impls.has(d.id as PhaseId)).map((d) => d.id);
    if (missing.length > 0) throw new Error(`no implementation for phase(s) ${missing.join(", ")}`);
    const kubeApiAs = (profile: "kubelet" | "apiserver-kubelet-client") =>
      createKubeApi({
        url: options.config.apiServerUrl,
        caFile: this.paths.caCert,
        certFile: this.paths.cert(profile),
        keyFile: this.paths.key(profile),
      });
    this.kubeApi = options.kubeApi ?? kubeApiAs("kubelet");
    // A test that brings its own API without a master one gets it for both identities.
    this.masterKubeApi = options.masterKubeApi ?? options.kubeApi ?? kubeApiAs("apiserver-kubelet-client");
    this.restore(loadPhaseState(options.stateFile));
  }

  /** The role's phases in order, as reported. */
  list(): PhaseStatusRecord[] {
    return this.definitions.map((d) => ({ ...this.records.get(d.id as PhaseId)! }));
  }

  /** What the link sends the control plane (protocol NodePhaseReport). */
  report(): NodePhaseReport {
    return { status: this.nodeStatusValue, phases: this.list() };
  }

  get nodeStatus(): NodePhaseStatus {
    return this.nodeStatusValue;
  }

  /** Every phase that can run (all but stop-only ones) is running. */
  allRunning(): boolean {
    return this.definitions.every((d) => d.stopOnly || this.records.get(d.id as PhaseId)?.state === "running");
  }

  setNodeStatus(status: NodePhaseStatus): void {
    if (status === this.nodeStatusValue) return;
    this.nodeStatusValue = status;
    this.persist();
    this.emit("node-status", status);
  }

  start(options: StartOptions = {}): Promise<EngineResult> {
    return this.enqueue(async () => {
      const from = this.orderOf(options.from);
      const intent = options.intent ?? "start";
      for (const def of this.definitions) {
        if (def.stopOnly || def.order < from) continue;
        const result = await this.invoke(def, "start", intent, options.regenerateCerts ?? false);
        if (!result.ok) return result;
      }
      return { ok: true };
    });
  }

  stop(options: StopOptions = {}): Promise<EngineResult> {
    return this.enqueue(async () => {
      const to = this.orderOf(options.to);
      const intent = options.intent ?? "stop";
      let first: EngineResult = { ok: true };
      // Best effort: a phase that cannot stop must not keep the ones below it running.
      for (const def of [...this.definitions].reverse()) {
        if (def.order < to || (def.stopOnly && options.skipStopOnly)) continue;
        const result = await this.invoke(def, "stop", intent, false);
        if (!result.ok && first.ok) first = result;
      }
      return first;
    });
  }

  status(): Promise<EngineResult> {
    return this.enqueue(async () => {
      for (const def of this.definitions) {
        if (def.stopOnly) continue;
        const result = await this.invoke(def, "status", "status", false);
        if (!result.ok) return result;
      }
      return { ok: true };
    });
  }

  /**
   * A master's sweep of its cluster's Nodes now (node-sweep.ts), asked by the control plane when
   * a worker waits for its label or left. Outside the queue: it only makes idempotent API calls,
   * and must not wait behind a phase that waits for it (a worker's node-taints on this host).
   */
  async sweep(signal?: AbortSignal): Promise<SweepResult> {
    if (this.role !== "master") throw new Error("only a master sweeps its cluster's Nodes");
    return sweepNodes(this.commandContext("sweep", signal));
  }

  /**
   * Imports the host's user images now, as the "load user images" phase does when it starts,
   * and answers the runtime's image list (images.stage). In the queue: the phase keeps the same
   * import record. Undefined when the runtime does not run: the phase imports them when it does.
   */
  importImages(signal?: AbortSignal): Promise<string[] | undefined> {
    return this.enqueue(async () => {
      if (this.records.get("start-runtime")?.state !== "running") return undefined;
      const ctx = this.commandContext("import-images", signal);
      await loadUserImages.start(ctx);
      return [...(await listImages(ctx))];
    });
  }

  /** The runtime's image list (images.list); undefined when the runtime does not run. Outside the queue: a read. */
  async listImages(signal?: AbortSignal): Promise<string[] | undefined> {
    if (this.records.get("start-runtime")?.state !== "running") return undefined;
    return [...(await listImages(this.commandContext("list-images", signal)))];
  }

  /** The context of work a command asks for outside the phases' own runs (status intent). */
  private commandContext(action: string, signal: AbortSignal | undefined) {
    const log = this.options.log.child({ action });
    return buildContext(this.contextParts(log), {
      signal: AbortSignal.any([this.abortController.signal, ...(signal ? [signal] : [])]),
      intent: "status",
      regenerateCerts: false,
      log,
    });
  }

  /** Cancels the running operation (its phase sees an aborted signal); queued ones still run. */
  abort(): void {
    this.abortController.abort(new Error("phase engine aborted"));
    this.abortController = new AbortController();
  }

  private orderOf(id: PhaseId | undefined): number {
    if (id === undefined) return 0;
    const def = this.definitions.find((d) => d.id === id);
    if (!def) throw new Error(`phase "${id}" is not one of a ${this.role}'s phases`);
    return def.order;
  }

  private enqueue<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async invoke(
    def: PhaseDefinition,
    action: "start" | "stop" | "status",
    intent: PhaseIntent,
    regenerateCerts: boolean,
  ): Promise<EngineResult> {
    const id = def.id as PhaseId;
    const phase = this.impls.get(id)!;
    const record = this.records.get(id)!;
    const log = this.options.log.child({ phase: id, action });
    const timeoutMs = this.options.phaseTimeoutMs ?? 10 * 60_000;
    const signal = AbortSignal.any([this.abortController.signal, AbortSignal.timeout(timeoutMs)]);
    const ctx = buildContext(this.contextParts(log), { signal, intent, regenerateCerts, log });
    const started = this.now();
    if (action !== "status") {
      this.update(id, { state: "executing", startedAt: started.toISOString(), finishedAt: null, durationMs: null });
    }
    try {
      const outcome = await untilAborted(phase[action](ctx), signal, `${id} ${action}`);
      const finished = this.now();
      const state: PhaseState = action === "stop" ? "stopped" : "running";
      const message = (outcome as PhaseOutcome)?.message ?? null;
      if (action === "status") this.update(id, { state, lastError: null, message });
      else {
        this.update(id, {
          state,
          lastError: null,
          message,
          finishedAt: finished.toISOString(),
          durationMs: finished.getTime() - started.getTime(),
        });
        log.info({ durationMs: finished.getTime() - started.getTime(), message }, `phase ${action} done`);
      }
      return { ok: true };
    } catch (err) {
      const error = describe(err).slice(0, MAX_ERROR);
      const finished = this.now();
      const timing =
        action === "status"
          ? {}
          : { finishedAt: finished.toISOString(), durationMs: finished.getTime() - started.getTime() };
      if (action !== "status" || record.state !== "failed" || record.lastError !== error) {
        log.warn({ err: error }, `phase ${action} failed`);
      }
      this.update(id, { state: "failed", lastError: error, ...timing });
      return { ok: false, failed: id, error };
    }
  }

  private contextParts(log: Logger): ContextParts {
    return {
      config: this.options.config,
      paths: this.paths,
      log,
      services: this.options.services,
      signCsr: this.options.signCsr,
      kubeApi: this.kubeApi,
      masterKubeApi: this.masterKubeApi,
    };
  }

  private update(id: PhaseId, changes: Partial<PhaseStatusRecord>): void {
    const before = this.records.get(id)!;
    const after = { ...before, ...changes };
    if (JSON.stringify(before) === JSON.stringify(after)) return;
    this.records.set(id, after);
    this.persist();
    const list = this.list();
    this.emit("change", list);
    this.options.onChange?.(list);
  }

  private persist(): void {
    const state: PersistedPhaseState = {
      version: 1,
      role: this.role,
      nodeId: this.options.config.nodeId,
      nodeStatus: this.nodeStatusValue,
      phases: this.list(),
    };
    try {
      savePhaseState(this.options.stateFile, state);
    } catch (err) {
      // A full state dir must not fail (and so restart) a phase: the states stay right in
      // memory and in the reports, the file keeps its last whole content, and the next change
      // writes them all (the state dir's condition says why meanwhile).
      if (!isNoSpace(err)) throw err;
      if (!this.persistRefused)
        this.options.log.warn({ file: this.options.stateFile }, "phase states not saved: no space");
      this.persistRefused = true;
      return;
    }
    this.persistRefused = false;
  }

  private restore(saved: PersistedPhaseState | undefined): void {
    const usable = saved && saved.role === this.role && saved.nodeId === this.options.config.nodeId;
    const byId = new Map((usable ? saved.phases : []).map((p) => [p.id, p]));
    for (const def of this.definitions) {
      const old = byId.get(def.id as PhaseId);
      const fresh: PhaseStatusRecord = {
        id: def.id as PhaseId,
        name: def.name,
        order: def.order,
        state: "not-started",
        lastError: null,
        message: null,
        startedAt: null,
        finishedAt: null,
        durationMs: null,
      };
      const record = old ? { ...fresh, ...old, name: def.name, order: def.order } : fresh;
      if (record.state === "executing") {
        // The agent died mid-phase: nobody knows how far it got, so it must run again.
        record.state = "failed";
        record.lastError = "interrupted: the agent stopped while this phase was executing";
      }
      this.records.set(def.id as PhaseId, record);
    }
    if (usable) this.nodeStatusValue = saved.nodeStatus;
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? ` (cause: ${err.cause.message})` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}

/** A phase that ignores its signal still cannot hold the engine past the signal. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal, what: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal, what));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal, what));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

function abortError(signal: AbortSignal, what: string): Error {
  const reason = signal.reason as Error | undefined;
  if (reason?.name === "TimeoutError") return new Error(`${what} timed out`);
  return new Error(`${what} aborted: ${reason?.message ?? "aborted"}`);
}
