import type { StreamEvent } from "./events.ts";
import { type Colours, elapsed } from "./output.ts";

/**
 * The live view of one operation: its nodes grouped in the batches the control plane rolls
 * them in (masters one at a time, then workers `batchPercent` percent at a time, as the
 * rollout does: routes/cluster-actions.ts), each node with its state, the phase it is in and
 * how long it has taken. Built from the operation's params and fed the events stream.
 */

export interface Operation {
  uuid: string;
  projectId: string;
  kind: string;
  targetUuid: string;
  state: "pending" | "running" | "succeeded" | "failed";
  step: number;
  error: string | null;
  params: Record<string, unknown>;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

type NodeState = "waiting" | "rolling" | "done" | "failed";

interface NodeView {
  id: string;
  name: string;
  role: "master" | "worker" | "host";
  state: NodeState;
  phase: string;
  startedAt?: number;
  finishedAt?: number;
}

interface Batch {
  label: string;
  nodes: NodeView[];
}

interface PhaseLike {
  id?: unknown;
  name?: unknown;
  order?: unknown;
  state?: unknown;
  lastError?: unknown;
}

/** The rollout's batch size (rollout.ts batchSize): a percent of the workers rounded down, at least 1. */
export const batchSize = (workers: number, percent: number) => Math.max(1, Math.floor((workers * percent) / 100));

const ROLLOUT_KINDS = new Set(["cluster.restart", "cluster.upgrade"]);
const HOST_UPGRADE = "hosts.upgrade";

export class OperationProgress {
  readonly batches: Batch[] = [];
  private readonly byId = new Map<string, NodeView>();
  step = "";

  constructor(
    readonly op: Operation,
    names: ReadonlyMap<string, { name: string; isMaster: boolean }>,
  ) {
    const p = op.params;
    const list = (...keys: string[]) => keys.flatMap((key) => (Array.isArray(p[key]) ? (p[key] as unknown[]) : []));
    const view = (entry: unknown, role: NodeView["role"]): NodeView => {
      const id = typeof entry === "string" ? entry : String((entry as { id?: unknown }).id ?? "");
      const name = (entry as { name?: unknown }).name;
      return {
        id,
        name: typeof name === "string" ? name : (names.get(id)?.name ?? id.slice(0, 8)),
        role,
        state: "waiting",
        phase: "",
      };
    };
    const masters = list("masters", "masterNodes").map((e) => view(e, "master"));
    const chosen = list("chosen").map((e) => view(e, "worker"));
    const workers = list("workers", "workerNodes").map((e) => view(e, "worker"));
    const percent = Number(p.batchPercent) || 10;
    const size = ROLLOUT_KINDS.has(op.kind) ? batchSize(workers.length + chosen.length, percent) : workers.length;
    const groups: { kind: string; nodes: NodeView[] }[] = masters.map((m) => ({ kind: "master", nodes: [m] }));
    if (chosen.length > 0) groups.push({ kind: "chosen workers", nodes: chosen });
    for (let i = 0; i < workers.length; i += Math.max(1, size)) {
      groups.push({ kind: "workers", nodes: workers.slice(i, i + size) });
    }
    // A host-agent rollout (hosts.upgrade) names its batches itself.
    const hostBatches = op.kind === HOST_UPGRADE ? list("batches").filter(Array.isArray) : [];
    for (const batch of hostBatches) groups.push({ kind: "hosts", nodes: batch.map((id) => view(id, "host")) });
    groups.forEach((g, i) => {
      this.batches.push({ label: `batch ${i + 1}/${groups.length} (${g.kind})`, nodes: g.nodes });
    });
    for (const node of groups.flatMap((g) => g.nodes)) this.byId.set(node.id, node);
  }

  /**
   * Applies one event; returns the lines that say what changed (for a log that is not a
   * terminal), empty when nothing of this operation changed.
   */
  apply(event: StreamEvent, now: number): string[] {
    const d = event.data;
    if (event.name.startsWith("operation.") && d.operationId === this.op.uuid) {
      // The runner sends operation.step when a step has finished.
      if (event.name === "operation.step" && typeof d.step === "string" && d.step !== this.step) {
        this.step = d.step;
        return [`step ${d.step} done`];
      }
      return [];
    }
    const node = typeof d.hostId === "string" ? this.byId.get(d.hostId) : undefined;
    if (!node) return [];
    const before = `${node.state} ${node.phase}`;
    if (event.name === "node.report") {
      const status = String(d.status);
      if (status === "converging" && node.state !== "rolling") {
        node.state = "rolling";
        node.startedAt = now;
        delete node.finishedAt;
      } else if (status === "ok" && node.state === "rolling") {
        node.state = "done";
        node.finishedAt = now;
      } else if (status === "failed" && node.state !== "failed") {
        node.state = "failed";
        node.startedAt ??= now;
        node.finishedAt = now;
      }
      node.phase = currentPhase(d.phases);
    } else if (event.name === "node.agent" && node.role === "host") {
      this.applyAgent(node, d, now);
    } else if (event.name === "node.disconnected" && node.state === "rolling") {
      node.phase = node.role === "host" ? "agent restarting" : "agent disconnected";
    }
    const after = `${node.state} ${node.phase}`;
    if (after === before) return [];
    const batch = this.batches.find((b) => b.nodes.includes(node));
    return [
      `${batch ? `${batch.label}  ` : ""}${node.name} (${node.role}): ${node.state}${node.phase ? `, ${node.phase}` : ""}`,
    ];
  }

  /** What a host's agent says of itself during a host-agent rollout: updating, back at the version, or failed. */
  private applyAgent(node: NodeView, d: Record<string, unknown>, now: number): void {
    const target = String(this.op.params.version ?? "");
    if (typeof d.agentError === "string" && d.agentError !== "" && node.state === "rolling") {
      node.state = "failed";
      node.finishedAt = now;
      node.phase = d.agentError;
    } else if (d.agentStatus === "updating" && node.state !== "rolling") {
      node.state = "rolling";
      node.startedAt = now;
      node.phase = `updating to ${target}`;
    } else if (d.agentStatus === "running" && d.agentVersion === target && node.state !== "done") {
      node.state = "done";
      node.startedAt ??= now;
      node.finishedAt = now;
      node.phase = `running ${target}`;
    }
  }

  /**
   * The whole view, for a terminal that is redrawn: each line cut to the terminal's width, so
   * none wraps and the redraw moves up exactly as many lines as it drew.
   */
  lines(now: number, c: Colours, width = 120): string[] {
    const out: string[] = [];
    const fit = (text: string, room: number) =>
      text.length > room ? `${text.slice(0, Math.max(0, room - 1))}…` : text;
    for (const batch of this.batches) {
      const states = batch.nodes.map((n) => n.state);
      const state = states.every((s) => s === "done")
        ? "done"
        : states.some((s) => s === "failed")
          ? "failed"
          : states.some((s) => s !== "waiting")
            ? "rolling"
            : "waiting";
      out.push(`${c.bold(fit(batch.label, width - 10))}  ${STATE_COLOUR[state](c, state)}`);
      const nameWidth = Math.max(...batch.nodes.map((n) => n.name.length));
      for (const n of batch.nodes) {
        const time = n.startedAt === undefined ? "" : elapsed((n.finishedAt ?? now) - n.startedAt);
        const head = `  ${n.name.padEnd(nameWidth)}  ${n.role.padEnd(6)}  `;
        const tail = `  ${time.padStart(7)}  `;
        const room = width - head.length - 7 - tail.length;
        const phase = room > 3 ? c.dim(fit(n.phase, room)) : "";
        out.push(`${head}${STATE_COLOUR[n.state](c, n.state.padEnd(7))}${tail}${phase}`.trimEnd());
      }
    }
    return out;
  }
}

const STATE_COLOUR: Record<NodeState, (c: Colours, text: string) => string> = {
  waiting: (c, t) => c.dim(t),
  rolling: (c, t) => c.yellow(t),
  done: (c, t) => c.green(t),
  failed: (c, t) => c.red(t),
};

/**
 * The phase a node is at: the first one not running (with its error), else "all phases
 * running". The stop-only phase (drain-pods) never runs while a node is up, so it is skipped.
 */
function currentPhase(phases: unknown): string {
  if (!Array.isArray(phases) || phases.length === 0) return "";
  const list = (phases as PhaseLike[]).filter((p) => p.id !== "drain-pods");
  const at = list.find((p) => p.state !== "running");
  if (!at) return `all ${list.length} phases running`;
  const error = typeof at.lastError === "string" && at.lastError ? `: ${at.lastError.split("\n")[0]}` : "";
  return `phase ${String(at.order ?? "")} ${String(at.name ?? "")} ${String(at.state ?? "")}${error}`.replace(
    /\s+/g,
    " ",
  );
}
