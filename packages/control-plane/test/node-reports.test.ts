import { nodes } from "@keelson/db";
import type { NodeReportFrame } from "@keelson/protocol";
import { eq, inArray, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeReportWriter } from "../src/domain/hosts/node-reports.ts";
import { createTestApp, type TestApp } from "./helpers.ts";
import { insertCluster, insertHost } from "./node-fixtures.ts";

/**
 * The node-report writer on the run's store: reports that arrive together are written by one
 * statement, each still checked against the node's own cluster, and a host's reports are
 * written in the order they came.
 */

let t: TestApp;
let clusterId: string;
let otherClusterId: string;
beforeAll(async () => {
  t = await createTestApp({ runOperations: false });
  clusterId = await insertCluster(t.db, t.projectId, "reports");
  otherClusterId = await insertCluster(t.db, t.projectId, "reports-other");
});
afterAll(() => t.close());

const phases = [
  { name: "kubelet", order: 1, state: "ok", note: 'quoted "text", ünïcode, a\nnew line, a \\ and a tab\t' },
  { name: "etcd", order: 2.5, state: "running", lastError: null, startedAt: "2026-11-26T08:00:00.000Z" },
];

function frame(cluster: string | null, status: string, apiResponding = true): NodeReportFrame {
  return {
    type: "node.report",
    clusterId: cluster,
    apiResponding,
    report: { status, phases },
  } as unknown as NodeReportFrame;
}

describe("node reports", () => {
  it("writes the reports of many nodes in one statement, each its own row", async () => {
    const hosts = await Promise.all(
      Array.from({ length: 12 }, (_, i) => insertHost(t.db, t.projectId, { name: `r${i}`, clusterId })),
    );
    const writer = new NodeReportWriter(t.db);
    const before = t.store.statements();
    const outcomes = await Promise.all(
      hosts.map((h, i) => writer.apply(h.id, frame(clusterId, i % 2 ? "converging" : "ok", i % 3 === 0))),
    );
    // One UPDATE, on PostgreSQL taking the rows' locks in id order itself (lockedInIdOrder):
    // no locking SELECT in a transaction before it.
    expect(t.store.statements() - before).toBe(1);
    expect(outcomes).toEqual(hosts.map(() => ({ stored: true })));
    const rows = await t.db
      .select()
      .from(nodes)
      .where(
        inArray(
          nodes.id,
          hosts.map((h) => h.id),
        ),
      );
    for (const [i, h] of hosts.entries()) {
      const row = rows.find((r) => r.id === h.id);
      expect(row).toMatchObject({
        status: i % 2 ? "converging" : "ok",
        apiResponding: i % 3 === 0 ? 1 : 0,
        agentConnected: 1,
        phases,
      });
      expect(row?.lastSeen).toMatch(/^\d{4}-\d\d-\d\dT/);
    }
    // The stored text is what JSON mode itself writes, byte for byte, on either store.
    const raw = await t.db
      .select({ text: sql<string>`${nodes.phases}` })
      .from(nodes)
      .where(eq(nodes.id, hosts[0]?.id as string));
    expect(raw[0]?.text).toBe(JSON.stringify(phases));
  });

  it("refuses a report of another cluster (or of none) and says which cluster was expected", async () => {
    const member = await insertHost(t.db, t.projectId, { name: "member", clusterId, status: "ok" });
    const free = await insertHost(t.db, t.projectId, { name: "free", status: "ok" });
    const writer = new NodeReportWriter(t.db);
    const outcomes = await Promise.all([
      writer.apply(member.id, frame(otherClusterId, "failed")),
      writer.apply(free.id, frame(null, "converging")),
      writer.apply(free.id, frame(clusterId, "failed")),
    ]);
    expect(outcomes).toEqual([
      { stored: false, expected: clusterId },
      { stored: true },
      { stored: false, expected: null },
    ]);
    const [m] = await t.db.select().from(nodes).where(eq(nodes.id, member.id));
    const [f] = await t.db.select().from(nodes).where(eq(nodes.id, free.id));
    expect(m?.status).toBe("ok");
    expect(f?.status).toBe("converging");
  });

  it("writes a host's reports in the order they came, the last one standing", async () => {
    const host = await insertHost(t.db, t.projectId, { name: "ordered", clusterId });
    const writer = new NodeReportWriter(t.db);
    const before = t.store.statements();
    await Promise.all(["converging", "failed", "ok"].map((status) => writer.apply(host.id, frame(clusterId, status))));
    // One host's reports never share a statement.
    expect(t.store.statements() - before).toBe(3);
    const [row] = await t.db.select().from(nodes).where(eq(nodes.id, host.id));
    expect(row?.status).toBe("ok");
  });

  it("rejects every report of a batch the database refused, and writes the next batch", async () => {
    const host = await insertHost(t.db, t.projectId, { name: "refused", clusterId });
    const hostB = await insertHost(t.db, t.projectId, { name: "refused-b", clusterId, status: "converging" });
    const writer = new NodeReportWriter(t.db);
    // No status (the protocol's parser lets none through): nodes.status is NOT NULL on both stores.
    const bad = [
      writer.apply(host.id, frame(clusterId, null as unknown as string)),
      writer.apply(hostB.id, frame(clusterId, "ok")),
    ];
    await expect(bad[0]).rejects.toThrow();
    await expect(bad[1]).rejects.toThrow();
    const [b] = await t.db.select().from(nodes).where(eq(nodes.id, hostB.id));
    expect(b?.status).toBe("converging");
    await expect(writer.apply(host.id, frame(clusterId, "ok"))).resolves.toEqual({ stored: true });
  });
});
