import { clusters, dialectOf, firstRow, inJsonArray, lockRows, nodes } from "@keelson/db";
import { and, eq, isNotNull } from "drizzle-orm";
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
 * reports costs one update, and the clusters of hosts whose link came or went are looked up
 * together then (every agent links again within seconds after a restart of the control plane:
 * one statement for all of them, not one per link).
 */
export function followClusterHealth(k: Keelson, delayMs = 200): () => void {
  const dirty = new Set<string>();
  /** Hosts whose link changed since the last flush: their clusters are dirty. */
  const linked = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const clustersOfHosts = async (hostIds: string[]) => {
    const rows = await k.db
      .selectDistinct({ clusterId: nodes.clusterId })
      .from(nodes)
      .where(and(inJsonArray(dialectOf(k.db), nodes.id, hostIds), isNotNull(nodes.clusterId)));
    return rows.flatMap((r) => (r.clusterId ? [r.clusterId] : []));
  };

  const flush = async () => {
    timer = undefined;
    // Stopped with the app: the database may be closing.
    if (stopped) return;
    if (linked.size > 0) {
      const hostIds = [...linked];
      linked.clear();
      try {
        for (const clusterId of await clustersOfHosts(hostIds)) dirty.add(clusterId);
      } catch (err) {
        k.log.warn({ err, hosts: hostIds.length }, "could not follow cluster health");
      }
    }
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
  const arm = () => {
    timer ??= setTimeout(flush, delayMs);
    timer.unref();
  };
  const onReport = (event: NodeReportEvent) => {
    if (!event.clusterId) return;
    dirty.add(event.clusterId);
    arm();
  };
  const onLink = (event: NodeLinkEvent) => {
    linked.add(event.hostId);
    arm();
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
