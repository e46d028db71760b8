import { nodes, operations } from "@keelson/db";
import { and, count, eq, inArray } from "drizzle-orm";
import type { Keelson } from "../context.ts";
import { ROLLOUT_OPS } from "../domain/clusters/rollouts/rollout.ts";
import type { ControlPlaneMetrics } from "./registry.ts";

const ROLLOUT_KINDS: string[] = Object.values(ROLLOUT_OPS);

/**
 * A rollout's node lists in the order its steps take them (rollout.ts): masters, then the
 * workers an upgrade was told to take first, then the rest. Each list's step saves the nodes
 * it finished as `progress.done`, reset when the next step begins.
 */
const LIST_OF_STEP: [suffix: string, list: string][] = [
  ["-masters", "masters"],
  ["-chosen-workers", "chosen"],
  ["-workers", "workers"],
];
const LIST_ORDER = ["masters", "chosen", "workers"];

/** Nodes done and in all of one running rollout, from its params and saved cursor. */
export function rolloutProgress(op: { params: Record<string, unknown>; cursor: Record<string, unknown> | null }): {
  done: number;
  total: number;
} {
  const size = (list: string) => {
    const value = op.params[list];
    return Array.isArray(value) ? value.length : 0;
  };
  const total = LIST_ORDER.reduce((sum, list) => sum + size(list), 0);
  const stepName = typeof op.cursor?.stepName === "string" ? op.cursor.stepName : undefined;
  const progress = op.cursor?.progress as { done?: unknown } | undefined;
  const current = stepName ? LIST_OF_STEP.find(([suffix]) => stepName.endsWith(suffix))?.[1] : undefined;
  if (!current) {
    // Before the first list (prefetch) nothing is done; after the last (settle, finish) all is.
    const step = typeof op.cursor?.step === "number" ? op.cursor.step : 0;
    const past = stepName === "settle" || stepName === "finish" || (stepName === undefined && step > 0);
    return { done: past ? total : 0, total };
  }
  const before = LIST_ORDER.slice(0, LIST_ORDER.indexOf(current)).reduce((sum, list) => sum + size(list), 0);
  const doneHere = Array.isArray(progress?.done) ? progress.done.length : 0;
  return { done: Math.min(total, before + doneHere), total };
}

/**
 * Gauges read at scrape time. What the database holds is the whole service's, so every replica
 * reports the same value: aggregate them with max(), not sum(). What a process holds (its own
 * agent links) is per process: sum() over replicas.
 */
export function registerScrapeGauges(metrics: ControlPlaneMetrics, keelson: Keelson): void {
  const { db } = keelson;
  metrics.gauge("keelson_agent_links_open", "Agent links this process holds (helloed or not).", [], (g) => {
    g.set(keelson.agents.links.open);
  });
  metrics.gauge(
    "keelson_hosts",
    "Hosts by agent link state as the database records it (all replicas): connected or disconnected.",
    ["agent"],
    async (g) => {
      const rows = await db
        .select({ connected: nodes.agentConnected, n: count() })
        .from(nodes)
        .groupBy(nodes.agentConnected);
      g.reset();
      g.set({ agent: "connected" }, 0);
      g.set({ agent: "disconnected" }, 0);
      for (const r of rows) g.inc({ agent: r.connected ? "connected" : "disconnected" }, Number(r.n));
    },
    "service",
  );
  metrics.gauge(
    "keelson_operations",
    "Operations recorded, by kind and state.",
    ["kind", "state"],
    async (g) => {
      const rows = await db
        .select({ kind: operations.kind, state: operations.state, n: count() })
        .from(operations)
        .groupBy(operations.kind, operations.state);
      g.reset();
      for (const r of rows) g.set({ kind: r.kind, state: r.state }, Number(r.n));
    },
    "service",
  );
  // Labelled by kind, not by operation: one series per operation id would grow without bound.
  // A cluster runs one rollout at a time, so per kind this is the fleet's rollouts in sum;
  // which cluster is where is in the API's operations and events.
  const rollouts = async () =>
    db
      .select({ kind: operations.kind, params: operations.params, cursor: operations.cursor })
      .from(operations)
      .where(and(eq(operations.state, "running"), inArray(operations.kind, ROLLOUT_KINDS)));
  const rolloutGauge = (name: string, help: string, pick: "done" | "total") =>
    metrics.gauge(
      name,
      help,
      ["kind"],
      async (g) => {
        g.reset();
        for (const kind of ROLLOUT_KINDS) g.set({ kind }, 0);
        for (const r of await rollouts()) g.inc({ kind: r.kind }, rolloutProgress(r)[pick]);
      },
      "service",
    );
  rolloutGauge("keelson_rollout_nodes_done", "Nodes finished in the running rollouts, by kind.", "done");
  rolloutGauge("keelson_rollout_nodes", "Nodes in the running rollouts, by kind.", "total");
  metrics.gauge("keelson_database_up", "1 when the database answered this scrape's ping, else 0.", [], async (g) => {
    g.set(
      await keelson.store.ping().then(
        () => 1,
        () => 0,
      ),
    );
  });
  metrics.gauge(
    "keelson_database_ping_seconds",
    "How long the database took to answer this scrape's ping.",
    [],
    async (g) => {
      const start = performance.now();
      await keelson.store.ping().catch(() => undefined);
      g.set((performance.now() - start) / 1000);
    },
  );
  metrics.gauge("keelson_storage_full", "1 while the data dir's disk (or PostgreSQL's) is full.", [], (g) => {
    g.set(keelson.storage.state ? 1 : 0);
  });
  metrics.gauge("keelson_operation_runner_up", "1 while this process runs operations.", [], (g) => {
    g.set(keelson.runner.isRunning ? 1 : 0);
  });
}
