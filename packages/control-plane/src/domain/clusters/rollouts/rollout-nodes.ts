import { AGENT_CAPABILITIES, CommandErrorCode, type CommandPayload } from "@keelson/protocol";
import type { AgentHub } from "../../../agents/hub.ts";
import { type LatestReport, latestReports } from "../../../agents/latest-reports.ts";
import type { NodeEvent } from "../../../agents/node-events.ts";
import type { Keelson } from "../../../context.ts";
import type { StepContext } from "../../../runner/types.ts";
import { nodePackageRefusal } from "../../packages/node-shelf.ts";
import { observe } from "../membership/membership.ts";
import {
  type Deadline,
  NodeCommandFailed,
  NodeDeadlineError,
  type ObservedNode,
  type StepCommand,
  sendWhenOnline,
  stepCommand,
  type Verdict,
  waitForNode,
} from "../membership/node-link.ts";

/**
 * One node of a rolling restart or upgrade (rollout.ts): send `node.restart` / `node.upgrade`
 * and wait until the node is back `ok` (a master with its API server responding), or failed,
 * or the deadline passed; after a master, wait until it reports etcd with all its members
 * healthy. Waits wake on the hub's node events, never by polling.
 */

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
  startedAt?: unknown;
}

/**
 * Starts noting each host's latest report to this process (agents/latest-reports.ts); call once at
 * startup, before agents connect. After a control-plane restart a node's row still shows what
 * it reported to the previous process; only a report to this one says where it is now.
 */
export function trackReports(hub: AgentHub): void {
  latestReports(hub);
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
    phases.find((p) => p && p.id !== "drain-pods" && p.state !== "running" && p.state !== "not-started") ??
    phases.find((p) => p && p.state === "not-started" && p.id !== "drain-pods");
  const api = node.apiResponding ? "" : "; API server not responding";
  return `status ${node.status}${at ? `; at phase ${String(at.id)} (${String(at.state)})` : ""}${api}`;
}

/** Each phase's last start (or stop) time as the node reported it. */
function phaseStarts(node: ObservedNode | undefined): Map<unknown, unknown> {
  return new Map(((node?.phases ?? []) as PhaseLike[]).map((p) => [p?.id, p?.startedAt]));
}

/**
 * True when a phase started (or stopped) since `before` was taken: the node's phases ran again,
 * so its restart began even if the `converging` report that said so was lost with the link.
 * Compares the node's own timestamps with each other, so host clock skew does not matter.
 */
function phasesRanSince(before: Map<unknown, unknown>, phases: unknown[]): boolean {
  return (phases as PhaseLike[]).some((p) => typeof p?.startedAt === "string" && p.startedAt !== before.get(p.id));
}

function isBack(node: { status: string; apiResponding: boolean }, isMaster: boolean): boolean {
  return node.status === "ok" && (!isMaster || node.apiResponding);
}

/**
 * For an agent that names its command in reports: the node is back once its latest report to
 * this process names `command` and says ok; failed once it names it and says failed. Reports
 * naming anything else (an earlier command, or none: from before this one began, still on
 * their way when it was sent) say nothing about it, whenever they arrive.
 */
function commandVerdict(
  latest: LatestReport,
  command: string,
  node: RolloutNode,
  clusterId: string,
  what: string,
): Verdict<undefined> {
  if (latest.clusterId !== clusterId) {
    return { failed: new Error(`${label(node)} left the cluster during its ${what}`) };
  }
  if (latest.command !== command) return undefined;
  if (latest.status === "failed") return { failed: new Error(`${label(node)} failed its ${what}: ${whereIs(latest)}`) };
  return isBack(latest, node.isMaster) ? { done: undefined } : undefined;
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
  const book = latestReports(hub);
  const clusterId = action.payload.clusterId;
  const what = action.name === "node.restart" ? "restart" : "upgrade";
  const command = stepCommand(ctx, node.id, action.name);
  // Reports naming this id show this node's restart: the command's own, or its repeat after
  // the agent restarted during it.
  let awaited = command.id;
  // Agents that do not name their command (older than `node-report-command`) are judged by
  // arrival order instead, which a report still on its way when the command left can fool:
  // the agent reports `converging` before it answers: seeing that proves this restart began,
  // so the node's `ok` from before it cannot be mistaken for its end.
  let began = resumed;
  // Whether the agent, as connected now, names its command: then the row is not read at all
  // (the verdict comes from its reports to this process), a read less per node.
  const namesCommands = hub.supports(node.id, AGENT_CAPABILITIES.reportCommand) === true;
  // A restart run whole while the link was cut reports `ok` after the reconnect, its
  // `converging` lost: the phases' start times, changed since now, still show it ran.
  const startsBefore = namesCommands ? new Map() : phaseStarts(await observe(ctx.db, node.id));
  const stopWatching = hub.nodeEvents.on(node.id, (event: NodeEvent) => {
    if (event.type !== "node-report" || event.namesCommands) return;
    if (event.report.status !== "ok" || phasesRanSince(startsBefore, event.report.phases)) began = true;
  });
  try {
    if (action.name === "node.upgrade" && action.payload.nodePackage) {
      const refused = nodePackageRefusal(hub, node.id, label(node));
      if (refused) throw new Error(refused);
    }
    const send = async (sending: StepCommand) => {
      const result = await sendWhenOnline(
        hub,
        node.id,
        action.name,
        action.payload as never,
        deadline,
        label(node),
        sending,
      );
      if (!(result as { accepted: boolean }).accepted) throw new Error(`${label(node)} did not accept ${action.name}`);
    };
    try {
      await send(command);
    } catch (err) {
      if (!(err instanceof NodeCommandFailed && err.agentCode === CommandErrorCode.INTERRUPTED)) throw err;
      // The agent itself restarted while it ran the command, so the node's restart never
      // finished. It is asked once more (its own id, stable across control-plane restarts); the
      // agent reports `converging` before it answers, so the wait below cannot mistake the
      // node's state from before for the end of this restart.
      ctx.log.warn({ nodeId: node.id, command: action.name }, "agent restarted during the command; sending it again");
      const again = stepCommand(ctx, node.id, action.name, ":after-interrupt");
      awaited = again.id;
      await send(again);
    }
    ctx.log.debug({ nodeId: node.id, command: action.name, resumed }, "node accepted");
    await waitForNode(
      hub,
      node.id,
      // The row, only for an agent judged by arrival order (its reports, read from the book, otherwise).
      async () =>
        namesCommands && book.latestOf(node.id)?.namesCommands !== false ? undefined : observe(ctx.db, node.id),
      (seen) => {
        const latest = book.latestOf(node.id);
        if (latest?.namesCommands) return commandVerdict(latest, awaited, node, clusterId, what);
        // A resumed node counts only on what it told this process.
        if (!latest && (resumed || namesCommands)) return undefined;
        if (!seen || seen.clusterId !== clusterId) {
          return { failed: new Error(`${label(node)} left the cluster during its ${what}`) };
        }
        if (seen.status === "failed")
          return { failed: new Error(`${label(node)} failed its ${what}: ${whereIs(seen)}`) };
        if (seen.status !== "ok" || phasesRanSince(startsBefore, seen.phases)) began = true;
        return began && isBack(seen, node.isMaster) ? { done: undefined } : undefined;
      },
      deadline,
      async () =>
        new NodeDeadlineError(
          `${label(node)} did not come back from its ${what} within ${seconds(k.settings.nodeRestartTimeoutMs)}: ` +
            whereIs(await observe(ctx.db, node.id)),
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
 * For agents older than the etcd field of node reports: every master of the cluster reporting
 * its start-etcd phase running stands for "etcd has all its members".
 */
async function waitForEtcdPhases(
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
      async () =>
        new NodeDeadlineError(
          `etcd of master ${label(master)} is not running again within ${seconds(k.settings.nodeRestartTimeoutMs)}: ` +
            whereIs(await observe(ctx.db, master.id)),
        ),
    );
  }
}

/** What the master last said about etcd since its restart began, for the timeout's error. */
function etcdSeen(report: LatestReport | undefined, since: number, masters: number): string {
  if (!report || report.seq <= since) return "it sent no report since its restart began";
  const status = report.status === "ok" ? "" : `; status ${report.status}`;
  const api = report.apiResponding ? "" : "; API server not responding";
  if (!report.etcd) return `its report carries no etcd member health${status}${api}`;
  const { members, healthy } = report.etcd;
  return `it reports ${members} etcd member(s), ${healthy} healthy, the cluster has ${masters} master(s)${status}${api}`;
}

/**
 * After a master is back, before the next one goes down ("etcd healthy with all members",
 * issue 5): a report from this master received after its restart began (`since`, a mark of
 * latestReports taken before the command was sent; 0 for a master resumed after a control-plane
 * restart: anything it told this process) says status ok, API server responding, and etcd with
 * as many members as the cluster has masters, every one of them healthy. Agents check etcd
 * again every second while it is not whole and report when that changes, so this wakes on
 * the report that says so. A report without etcd health (an agent older than the field) falls
 * back to every master's start-etcd phase running, as before the field existed.
 */
export async function waitForEtcdWhole(
  k: Keelson,
  ctx: StepContext,
  master: RolloutNode,
  masters: RolloutNode[],
  since: number,
  deadline: Deadline,
): Promise<void> {
  const book = latestReports(k.agents);
  const clusterId = ctx.op.targetId;
  const started = Date.now();
  const outcome = await waitForNode<"whole" | "no-etcd">(
    k.agents,
    master.id,
    () => observe(ctx.db, master.id),
    (seen) => {
      if (!seen || seen.clusterId !== clusterId) {
        return { failed: new Error(`${label(master)} left the cluster while etcd was awaited`) };
      }
      const report = book.latestOf(master.id);
      if (!report || report.seq <= since) return undefined;
      if (report.status === "failed") {
        return { failed: new Error(`${label(master)} failed after its restart: ${whereIs(seen)}`) };
      }
      if (!report.etcd) return report.status === "ok" ? { done: "no-etcd" } : undefined;
      const { members, healthy } = report.etcd;
      const whole = members === masters.length && healthy === members;
      return whole && report.status === "ok" && report.apiResponding ? { done: "whole" } : undefined;
    },
    deadline,
    () =>
      new NodeDeadlineError(
        `etcd is not whole after the restart of master ${label(master)} within ` +
          `${seconds(k.settings.nodeRestartTimeoutMs)}: ${etcdSeen(book.latestOf(master.id), since, masters.length)}`,
      ),
  );
  if (outcome === "whole") {
    ctx.log.info(
      { nodeId: master.id, members: masters.length, waitedMs: Date.now() - started },
      "etcd has all its members again; next master may restart",
    );
    return;
  }
  ctx.log.warn(
    { nodeId: master.id },
    "the master's agent reports no etcd member health (an older agent): waiting for every master's etcd phase instead",
  );
  await waitForEtcdPhases(k, ctx, masters, deadline);
}
