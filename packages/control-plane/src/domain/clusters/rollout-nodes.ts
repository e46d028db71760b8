import type { Db } from "@keelson/db";
import { CommandErrorCode, type CommandPayload } from "@keelson/protocol";
import type { AgentHub } from "../../agents/hub.ts";
import type { NodeEvent } from "../../agents/node-events.ts";
import type { Keelson } from "../../context.ts";
import type { StepContext } from "../../operations/types.ts";
import {
  type Deadline,
  NodeCommandFailed,
  NodeDeadlineError,
  type ObservedNode,
  sendWhenOnline,
  waitForNode,
} from "./node-link.ts";

/**
 * One node of a rolling restart or upgrade (rollout.ts): send `node.restart` / `node.upgrade`
 * and wait until the node is back `ok` (a master with its API server responding), or failed,
 * or the deadline passed. Waits wake on the hub's node events, never by polling.
 */

const DEFAULT_RESTART_TIMEOUT_MS = 10 * 60_000;

/** How long one node may take to come back from a restart or upgrade (env KEELSON_NODE_RESTART_TIMEOUT_MS). */
export function nodeRestartTimeoutMs(): number {
  const value = Number(process.env.KEELSON_NODE_RESTART_TIMEOUT_MS);
  return Number.isFinite(value) && value > 0 ? value : DEFAULT_RESTART_TIMEOUT_MS;
}

export interface RolloutNode {
  id: string;
  name: string;
  isMaster: boolean;
}

export type NodeAction =
  | { name: "node.restart"; payload: CommandPayload<"node.restart"> }
  | { name: "node.upgrade"; payload: CommandPayload<"node.upgrade"> };

interface PhaseLike {
  id?: unknown;
  name?: unknown;
  state?: unknown;
  lastError?: unknown;
}

/**
 * Hosts that sent a node report since this process started. After a control-plane restart a
 * node's row still shows what it reported to the previous process; only a report to this one
 * (every agent sends one right after reconnecting) says where it is now.
 */
const reportedHosts = new WeakMap<AgentHub, Set<string>>();

/** Starts noting which hosts reported; call once at startup, before agents connect. */
export function trackReports(hub: AgentHub): void {
  if (reportedHosts.has(hub)) return;
  const seen = new Set<string>();
  reportedHosts.set(hub, seen);
  hub.nodeEvents.all.on("node-report", (event) => seen.add(event.hostId));
}

function reportedSinceStart(hub: AgentHub, hostId: string): boolean {
  return reportedHosts.get(hub)?.has(hostId) ?? false;
}

type ObserveRow = { cluster_id: string | null; status: string; api_responding: number; phases: string | null };
const observeStatements = new WeakMap<Db, ReturnType<Db["$client"]["prepare"]>>();

function observe(db: Db, nodeId: string): ObservedNode | undefined {
  let statement = observeStatements.get(db);
  if (!statement) {
    statement = db.$client.prepare("SELECT cluster_id, status, api_responding, phases FROM nodes WHERE id = ?");
    observeStatements.set(db, statement);
  }
  const row = statement.get(nodeId) as ObserveRow | undefined;
  if (!row) return undefined;
  let phases: unknown[] = [];
  try {
    const parsed: unknown = row.phases ? JSON.parse(row.phases) : [];
    if (Array.isArray(parsed)) phases = parsed;
  } catch {
    // A row with unreadable phases reads as none.
  }
  return { clusterId: row.cluster_id, status: row.status, apiResponding: row.api_responding === 1, phases };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

export function label(node: { id: string; name: string }): string {
  return `node ${node.name} (${node.id})`;
}

/** Which phase failed, or where the node is, for the operation's error. */
export function whereIs(node: ObservedNode | undefined): string {
  if (!node) return "the node is gone";
  const phases = node.phases as PhaseLike[];
  const failed = phases.find((p) => p && p.state === "failed");
  if (failed) {
    const error = typeof failed.lastError === "string" && failed.lastError !== "" ? failed.lastError : "no error given";
    return `status ${node.status}; phase "${String(failed.name)}" (${String(failed.id)}) failed: ${error}`;
  }
  const at =
    phases.find((p) => p && p.state !== "running" && p.state !== "not-started") ??
    phases.find((p) => p && p.state === "not-started" && p.id !== "drain-pods");
  const api = node.apiResponding ? "" : "; API server not responding";
  return `status ${node.status}${at ? `; at phase ${String(at.id)} (${String(at.state)})` : ""}${api}`;
}

function isBack(node: ObservedNode, isMaster: boolean): boolean {
  return node.status === "ok" && (!isMaster || node.apiResponding);
}

/**
 * Restarts or upgrades one node. The command carries an id fixed by the operation and the node,
 * so `resumed` (the operation recorded it started before a control-plane restart) sends it
 * again safely: an agent that already ran it answers from its command record, and one that
 * never received it (the crash came before the frame left) runs it now. Resolves once the node
 * is back; rejects naming the node and its phase when it fails or the deadline passes.
 */
export async function rollNode(
  k: Keelson,
  ctx: StepContext,
  node: RolloutNode,
  action: NodeAction,
  deadline: Deadline,
  resumed: boolean,
): Promise<void> {
  const hub = k.agents;
  const clusterId = action.payload.clusterId;
  const what = action.name === "node.restart" ? "restart" : "upgrade";
  // The agent reports `converging` before it answers: seeing that proves this restart began,
  // so the node's `ok` from before it cannot be mistaken for its end.
  let began = resumed;
  const stopWatching = hub.nodeEvents.on(node.id, (event: NodeEvent) => {
    if (event.type === "node-report" && event.report.status !== "ok") began = true;
  });
  try {
    const commandId = `${ctx.op.id}:${node.id}:${action.name}`;
    const send = async (id: string) => {
      const result = await sendWhenOnline(
        hub,
        node.id,
        action.name,
        action.payload as never,
        deadline,
        label(node),
        id,
      );
      if (!(result as { accepted: boolean }).accepted) throw new Error(`${label(node)} did not accept ${action.name}`);
    };
    try {
      await send(commandId);
    } catch (err) {
      if (!(err instanceof NodeCommandFailed && err.agentCode === CommandErrorCode.INTERRUPTED)) throw err;
      // The agent itself restarted while it ran the command, so the node's restart never
      // finished. It is asked once more (its own id, stable across control-plane restarts); the
      // agent reports `converging` before it answers, so the wait below cannot mistake the
      // node's state from before for the end of this restart.
      ctx.log.warn({ nodeId: node.id, command: action.name }, "agent restarted during the command; sending it again");
      await send(`${commandId}:after-interrupt`);
    }
    ctx.log.debug({ nodeId: node.id, command: action.name, resumed }, "node accepted");
    await waitForNode(
      hub,
      node.id,
      () => observe(ctx.db, node.id),
      (seen) => {
        // A resumed node counts only on what it told this process.
        if (resumed && !reportedSinceStart(hub, node.id)) return undefined;
        if (!seen || seen.clusterId !== clusterId) {
          return { failed: new Error(`${label(node)} left the cluster during its ${what}`) };
        }
        if (seen.status === "failed") {
          return { failed: new Error(`${label(node)} failed its ${what}: ${whereIs(seen)}`) };
        }
        if (seen.status !== "ok") began = true;
        return began && isBack(seen, node.isMaster) ? { done: undefined } : undefined;
      },
      deadline,
      () =>
        new NodeDeadlineError(
          `${label(node)} did not come back from its ${what} within ${seconds(nodeRestartTimeoutMs())}: ` +
            whereIs(observe(ctx.db, node.id)),
        ),
    );
  } finally {
    stopWatching();
  }
}

function etcdRunning(node: ObservedNode | undefined): boolean {
  return (
    (node?.phases as PhaseLike[] | undefined)?.some((p) => p?.id === "start-etcd" && p.state === "running") ?? false
  );
}

/**
 * After a master is back: every master of the cluster reports its etcd phase running (the
 * agents' reports carry no etcd member health, so "each member's etcd runs" stands for it),
 * so the next master goes down only while etcd has all its members.
 */
export async function waitForEtcdMembers(
  k: Keelson,
  ctx: StepContext,
  masters: RolloutNode[],
  deadline: Deadline,
): Promise<void> {
  for (const master of masters) {
    await waitForNode(
      k.agents,
      master.id,
      () => observe(ctx.db, master.id),
      (seen) => (etcdRunning(seen) ? { done: undefined } : undefined),
      deadline,
      () =>
        new NodeDeadlineError(
          `etcd of master ${label(master)} is not running again within ${seconds(nodeRestartTimeoutMs())}: ` +
            whereIs(observe(ctx.db, master.id)),
        ),
    );
  }
}
