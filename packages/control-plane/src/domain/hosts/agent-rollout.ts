import { type Db, firstRow, nodes } from "@keelson/db";
import { AGENT_PACKAGE_NAME } from "@keelson/protocol";
import { eq } from "drizzle-orm";
import type { AgentHub } from "../../agents/hub.ts";
import type { NodeEvent } from "../../agents/node-events.ts";
import type { Keelson } from "../../context.ts";
import { activeOperationFor, operationParams } from "../../runner/store.ts";
import { OperationInterrupted, type OperationKind, type StepContext } from "../../runner/types.ts";

export const HOST_UPGRADE_KIND = "hosts.upgrade";

/** The hosts of an unfinished host-agent rollout of the project (every batch, done or not). */
export async function hostsInAgentRollout(
  tx: Parameters<typeof activeOperationFor>[0],
  projectId: string,
): Promise<{ operationId: string; hosts: Set<string> } | undefined> {
  const op = await activeOperationFor(tx, projectId, [HOST_UPGRADE_KIND]);
  if (!op) return undefined;
  const params = (await operationParams(tx, op.id)) as Partial<HostUpgradeParams> | undefined;
  const batches = params?.batches ?? [];
  return { operationId: op.id, hosts: new Set(batches.flat()) };
}

/** The agent answers agent.upgrade at once; the upgrade itself is what the wait is for. */
const ACK_TIMEOUT_MS = 15_000;

/** What the request recorded (operations.params); the batches are fixed when it is made. */
export interface HostUpgradeParams {
  version: string;
  sha256: string;
  url: string;
  batches: string[][];
}

/**
 * `hosts.upgrade`: one step per batch. Each host of the batch gets `agent.upgrade` with the
 * control-plane-served package, and the step ends when every one of them is back `running` at
 * the new version (its hello or status says so). The first host that reports an upgrade error,
 * or does not come back in time, fails the step and so the operation: later batches are never
 * touched. Steps are idempotent: after a restart a host already at the version is done, one
 * still `updating` is only waited for, and any other is asked (again).
 */
export function hostUpgradeKind(k: Pick<Keelson, "agents" | "settings">): OperationKind {
  return {
    kind: HOST_UPGRADE_KIND,
    steps(op) {
      const params = op.params as unknown as HostUpgradeParams;
      return params.batches.map((batch, i) => ({
        name: `batch-${i + 1}`,
        run: (ctx: StepContext) => upgradeBatch(k.agents, ctx, params, batch, k.settings.hostUpgradeTimeoutMs),
      }));
    },
  };
}

async function upgradeBatch(
  hub: AgentHub,
  ctx: StepContext,
  params: HostUpgradeParams,
  batch: string[],
  timeoutMs: number,
) {
  const deadline = Date.now() + timeoutMs;
  const results = await Promise.allSettled(batch.map((hostId) => upgradeHost(hub, ctx, params, hostId, deadline)));
  if (ctx.signal.aborted) throw new OperationInterrupted();
  const failures = results.flatMap((r) => (r.status === "rejected" ? [(r.reason as Error).message] : []));
  if (failures.length > 0) {
    throw new Error(`agent upgrade to ${params.version} stopped: ${failures.join("; ")}`);
  }
}

interface AgentState {
  connected: boolean;
  agentVersion: string;
  agentStatus: string;
  agentError: string | null;
}

async function readState(hub: AgentHub, db: Db, hostId: string): Promise<AgentState | undefined> {
  // Presence is written in batches; flush so the row holds what the last frame said.
  await hub.flushPresence();
  const row = firstRow(
    await db
      .select({ v: nodes.agentVersion, s: nodes.agentStatus, e: nodes.agentError })
      .from(nodes)
      .where(eq(nodes.id, hostId)),
  );
  if (!row) return undefined;
  return { connected: hub.isConnected(hostId), agentVersion: row.v, agentStatus: row.s, agentError: row.e };
}

const upgraded = (s: AgentState, version: string) =>
  s.connected && s.agentVersion === version && s.agentStatus === "running";

async function upgradeHost(
  hub: AgentHub,
  ctx: StepContext,
  params: HostUpgradeParams,
  hostId: string,
  deadline: number,
): Promise<void> {
  const initial = await readState(hub, ctx.db, hostId);
  if (!initial) throw new Error(`host ${hostId} no longer exists`);
  if (upgraded(initial, params.version)) return;
  let asked = false;
  await new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      off();
      clearTimeout(timer);
      ctx.signal.removeEventListener("abort", onAbort);
      // The event came before its presence batch: write it, so that once the operation says
      // done the host record says so too.
      hub.flushPresence().then(() => (err ? reject(err) : resolve()), reject);
    };
    const onAbort = () => finish(new OperationInterrupted());
    const timer = setTimeout(
      () =>
        finish(
          new Error(
            `host ${hostId} did not come back running at ${params.version} in time` +
              (hub.isConnected(hostId) ? "" : " (its agent is offline)"),
          ),
        ),
      Math.max(0, deadline - Date.now()),
    );
    const ask = () => {
      if (asked) return;
      asked = true;
      void ctx.saveProgress({ asked: [...new Set([...((ctx.progress.asked as string[]) ?? []), hostId])] });
      hub
        .sendCommand(
          hostId,
          "agent.upgrade",
          { name: AGENT_PACKAGE_NAME, version: params.version, url: params.url, sha256: params.sha256 },
          { timeoutMs: ACK_TIMEOUT_MS },
        )
        .then(
          (answer) => {
            // Not accepted means it is upgrading already (to something); its outcome tells.
            if (!answer.accepted) ctx.log.info({ hostId }, "agent was already upgrading");
          },
          (err: Error) => finish(new Error(`host ${hostId}: agent.upgrade failed: ${err.message}`)),
        );
    };
    // Subscribed before anything is sent: the agent may answer in the same tick.
    const off = hub.nodeEvents.on(hostId, (event: NodeEvent) => {
      if (event.type === "link") {
        // Back after a restart that did not say hello at the new version yet: nothing to do;
        // its hello follows as an "agent" event. A host that was offline at the start is
        // asked once it is back.
        if (event.connected && !asked) void judgeNow();
        return;
      }
      if (event.type !== "agent") return;
      const state: AgentState = { connected: true, ...event };
      if (upgraded(state, params.version)) finish();
      else if (asked && state.agentStatus === "running" && state.agentError) {
        finish(new Error(`host ${hostId}: ${state.agentError}`));
      }
    });
    const judgeNow = async () => {
      const state = await readState(hub, ctx.db, hostId).catch((err: Error) => {
        finish(err);
        return null;
      });
      if (state === null) return;
      if (!state) return finish(new Error(`host ${hostId} no longer exists`));
      if (upgraded(state, params.version)) return finish();
      // Asked before a restart of the control plane and failed meanwhile: its hello says so.
      const askedBefore = ((ctx.progress.asked as string[] | undefined) ?? []).includes(hostId);
      if (!asked && askedBefore && state.connected && state.agentStatus === "running" && state.agentError) {
        return finish(new Error(`host ${hostId}: ${state.agentError}`));
      }
      // One that is upgrading (a resumed step, or upgraded by hand) is only waited for.
      if (state.connected && state.agentStatus !== "updating") ask();
    };
    ctx.signal.addEventListener("abort", onAbort);
    void judgeNow();
  });
}
