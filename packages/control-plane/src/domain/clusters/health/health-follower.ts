import { clusters, firstRow, lockRows, nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { NodeLinkEvent, NodeReportEvent } from "../../../agents/node-events.ts";
import type { Keelson } from "../../../context.ts";
import { activeOperationFor } from "../../../runner/store.ts";
import { currentClusterStatus } from "./settle.ts";

/**
 * Keeps an idle cluster's `status` and `lastOk` following its nodes between tasks: a master
 * that fails later turns the cluster `error` once quorum is gone, a failed node that recovers
 * turns it back `ok`, and every report while the cluster is ok refreshes `lastOk` ("when the
 * cluster last reported OK"). While an operation runs on the cluster it owns the status and
 * this stays out of the way. Changes are coalesced per cluster over `delayMs`, so a burst of
 * reports costs one update.
 */
export function followClusterHealth(k: Keelson, delayMs = 200): () => void {
  const dirty = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const clusterOfHost = async (hostId: string) =>
    firstRow(await k.db.select({ clusterId: nodes.clusterId }).from(nodes).where(eq(nodes.id, hostId)))?.clusterId ??
    null;

  const flush = async () => {
    timer = undefined;
    // Stopped with the app: the database may be closing.
    if (stopped) return;
    const ids = [...dirty];
    dirty.clear();
    for (const id of ids) {
      try {
        const row = firstRow(await k.db.select({ status: clusters.status }).from(clusters).where(eq(clusters.id, id)));
        if (!row || row.status === "deleting" || (await activeOperationFor(k.db, id))) continue;
        // Outside the transaction: it writes the hosts' pending presence first.
        const status = await currentClusterStatus(k, k.db, id);
        // Checked again under the row lock every task start takes (start-task.ts): a task
        // recorded since the check above owns the status, and this write must not undo its mark.
        await k.db.transaction(async (tx) => {
          const locked = firstRow(await lockRows(tx, clusters, eq(clusters.id, id)));
          if (!locked || locked.status === "deleting" || (await activeOperationFor(tx, id))) return;
          await tx
            .update(clusters)
            .set({ status, ...(status === "ok" ? { lastOk: new Date().toISOString() } : {}) })
            .where(eq(clusters.id, id));
        });
      } catch (err) {
        k.log.warn({ err, clusterId: id }, "could not follow cluster health");
      }
    }
  };
  const mark = (clusterId: string | null) => {
    if (!clusterId) return;
    dirty.add(clusterId);
    timer ??= setTimeout(flush, delayMs);
    timer.unref();
  };
  const onReport = (event: NodeReportEvent) => mark(event.clusterId);
  const onLink = (event: NodeLinkEvent) => {
    clusterOfHost(event.hostId).then(mark, (err: unknown) =>
      k.log.warn({ err, hostId: event.hostId }, "could not follow cluster health"),
    );
  };

  k.agents.nodeEvents.all.on("node-report", onReport);
  k.agents.nodeEvents.all.on("link", onLink);
  return () => {
    stopped = true;
    k.agents.nodeEvents.all.off("node-report", onReport);
    k.agents.nodeEvents.all.off("link", onLink);
    if (timer) clearTimeout(timer);
  };
}
