// `pnpm bench scale`: how the cluster list grows with the work (issue 18, "Growth"). Clusters are
// seeded through the store (not the API) to 1,000, 10,000 and 50,000 (BENCH_SCALE_SIZES) in one
// project, on SQLite and on PostgreSQL; at each size a fresh keelson-server runs on the data and
// the bench takes its idle RSS, the first list (computed), the list again (cached), the list
// after a cluster is created through the API (computed again), the first page of 500 after a write
// (read in SQL: it should not grow with the list) and its RSS after. One request at a time; each figure is the median of BENCH_SCALE_TRIES. Prints the
// table and the time per 1,000 clusters at each size: flat means linear growth.
// Nodes are seeded beside the clusters, as many at each size; the second table gives the node
// list (v4) and the admin's host list, whole and a page of 500, each after that same write (the
// node and host lists are not cached: each read is computed), and its milliseconds per 1,000.
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { SPEC_DEFAULTS } from "../../../packages/control-plane/src/domain/clusters/spec/fields.ts";
import {
  cloudProviders,
  clusters,
  nodePools,
  nodes,
  openStore,
  parseDatabaseUrl,
  projects,
  type Store,
} from "../../../packages/db/src/index.ts";
import { freePort } from "../../e2e/support/processes.ts";
import { simPhases } from "../../sim/node.ts";
import { startPostgres } from "../../support/postgres.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";
import { spawnNode, stopChild } from "../agents/children.ts";
import { memoryMiB } from "../agents/proc-stats.ts";
import { markdownTable } from "../support/markdown-table.ts";
import { median } from "../support/median.ts";

const SIZES = (process.env.BENCH_SCALE_SIZES ?? "1000,10000,50000").split(",").map(Number);
const TRIES = Number(process.env.BENCH_SCALE_TRIES ?? 3);
const ADMIN = "bench-admin-token";
const BATCH = 500;
const PAGE = 500;

interface Row {
  store: string;
  clusters: number;
  idleRssMiB: number;
  firstMs: number;
  cachedMs: number;
  afterWriteMs: number;
  /** The first page of PAGE clusters after a write: read in SQL, it should not grow with the list. */
  pageMs: number;
  rssMiB: number;
  bytes: number;
}

/** The node and host lists at one size, each read after a write. */
interface NodeRow {
  store: string;
  nodes: number;
  nodeBytes: number;
  nodesMs: number;
  nodePageMs: number;
  hostBytes: number;
  hostsMs: number;
  hostPageMs: number;
}

async function openBenchStore(dataDir: string, url: string | undefined): Promise<Store> {
  return openStore(
    url
      ? {
          dialect: "postgres",
          target: parseDatabaseUrl(url),
          poolSize: 4,
          statementTimeoutMs: 600_000,
          connectTimeoutMs: 5_000,
          startTimeoutMs: 0,
          applicationName: "keelson-bench",
          binaryVersion: "0.1.0",
        }
      : { dialect: "sqlite", file: join(dataDir, "keelson.sqlite"), binaryVersion: "0.1.0" },
  );
}

/** A keelson-server on the data for the length of `run`. */
async function withServer<T>(
  dataDir: string,
  url: string | undefined,
  run: (base: string, pid: number) => Promise<T>,
): Promise<T> {
  const port = await freePort();
  const server = spawnNode(
    ["packages/control-plane/bin/keelson-server.mjs"],
    {
      KEELSON_LISTEN: `127.0.0.1:${port}`,
      KEELSON_DATA_DIR: dataDir,
      KEELSON_ADMIN_TOKEN: ADMIN,
      KEELSON_LOG_LEVEL: "error",
      KEELSON_TLS: "off",
      NODE_ENV: "production",
      ...(url ? { KEELSON_DATABASE_URL: url, ...secretsKeyEnv() } : {}),
    },
    { quiet: true },
  );
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      if (server.exitCode !== null) throw new Error("keelson-server exited before it was ready");
      const ok = await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (i > 600) throw new Error("keelson-server not ready in 60 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    return await run(base, server.pid as number);
  } finally {
    await stopChild(server);
  }
}

/** Seeds clusters and as many nodes into the default project until it has `target` of each. */
async function seed(store: Store, projectId: string, from: number, target: number): Promise<void> {
  const [pool] = await store.db
    .select({ poolId: nodePools.id, providerId: cloudProviders.id })
    .from(nodePools)
    .innerJoin(cloudProviders, eq(cloudProviders.id, nodePools.cloudProviderId))
    .where(and(eq(nodePools.projectId, projectId), eq(cloudProviders.type, "local")));
  if (!pool) throw new Error("the default project has no local pool");
  for (let i = from; i < target; i += BATCH) {
    const rows = [];
    for (let j = i; j < Math.min(target, i + BATCH); j++) {
      const name = `scale-${j}`;
      rows.push({
        id: randomUUID(),
        projectId,
        name,
        nodePoolId: pool.poolId,
        cloudProviderId: pool.providerId,
        kubeRoleVersion: "1.29.2-pmk.1",
        spec: {
          ...SPEC_DEFAULTS,
          containerRuntime: "containerd",
          name,
          kubeRoleVersion: "1.29.2-pmk.1",
          tags: { i: String(j) },
        },
        caCertPem: "bench",
        caKeyEnc: "bench",
      });
    }
    await store.db.insert(clusters).values(rows as never);
    // Nodes of one batch share a creation millisecond or a few: their name and uuid order them.
    const hosts = [];
    // A running worker's phase list, as its agent reports it (about 4 KB): the rows a list
    // reads are as large as a real fleet's.
    const phases = simPhases("worker", "ok", new Date());
    for (let j = i; j < Math.min(target, i + BATCH); j++) {
      const name = `node-${j}`;
      const ip = `10.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`;
      hosts.push({
        id: randomUUID(),
        projectId,
        nodePoolId: pool.poolId,
        name,
        primaryIp: ip,
        agentVersion: "0.1.0",
        status: "ok",
        phases,
        facts: {
          hostname: name,
          os: { platform: "linux", family: "debian", distro: "Debian GNU/Linux", release: "12", kernel: "6.1.0" },
          arch: "x64",
          cpu: { model: "Bench CPU", count: 4 },
          memory: { totalBytes: 8589934592 },
          interfaces: [{ name: "eth0", mac: "02:00:00:00:00:01", addresses: [ip] }],
          primaryIp: ip,
          agentVersion: "0.1.0",
        },
      });
    }
    await store.db.insert(nodes).values(hosts);
  }
}

async function timedGet(url: string): Promise<{ ms: number; bytes: number }> {
  const started = performance.now();
  const res = await fetch(url, { headers: { "x-auth-token": ADMIN } });
  const body = await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return { ms: performance.now() - started, bytes: body.byteLength };
}

async function growth(name: string, url: string | undefined): Promise<{ clusters: Row[]; nodes: NodeRow[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), "keelson-bench-scale-"));
  // The first start migrates and makes the default project and its local pool.
  await withServer(dataDir, url, async () => undefined);
  const rows: Row[] = [];
  const nodeRows: NodeRow[] = [];
  let seeded = 0;
  for (const size of SIZES) {
    const store = await openBenchStore(dataDir, url);
    let projectId: string;
    try {
      const [project] = await store.db.select().from(projects).where(eq(projects.name, "default"));
      projectId = (project as { id: string }).id;
      await seed(store, projectId, seeded, size);
      seeded = size;
    } finally {
      await store.close();
    }
    const [clusterRow, nodeRow] = await withServer(dataDir, url, async (base, pid) => {
      const list = `${base}/v4/${projectId}/clusters`;
      const nodeList = `${base}/v4/${projectId}/nodes`;
      const hostList = `${base}/v1/hosts`;
      const idleRssMiB = memoryMiB(pid).rss;
      const first: number[] = [];
      const cached: number[] = [];
      const afterWrite: number[] = [];
      const page: number[] = [];
      const byNode = { whole: [] as number[], page: [] as number[], bytes: 0 };
      const byHost = { whole: [] as number[], page: [] as number[], bytes: 0 };
      let bytes = 0;
      for (let i = 0; i < TRIES; i++) {
        // The first list of the process, then each one after the cluster created below: computed.
        const got = await timedGet(list);
        (i === 0 ? first : afterWrite).push(got.ms);
        bytes = got.bytes;
        cached.push((await timedGet(list)).ms);
        const res = await fetch(`${base}/v4/${projectId}/clusters`, {
          method: "POST",
          headers: { "x-auth-token": ADMIN, "content-type": "application/json" },
          body: JSON.stringify({ name: `written-${size}-${i}` }),
        });
        await res.arrayBuffer();
        page.push((await timedGet(`${list}?limit=${PAGE}`)).ms);
        for (const [of, at] of [
          [byNode, nodeList],
          [byHost, hostList],
        ] as const) {
          const whole = await timedGet(at);
          of.whole.push(whole.ms);
          of.bytes = whole.bytes;
          of.page.push((await timedGet(`${at}?limit=${PAGE}`)).ms);
        }
      }
      const clusterRow: Row = {
        store: name,
        clusters: size,
        idleRssMiB,
        firstMs: median(first),
        cachedMs: median(cached),
        afterWriteMs: median(afterWrite),
        pageMs: median(page),
        rssMiB: memoryMiB(pid).rss,
        bytes,
      };
      const nodeRow: NodeRow = {
        store: name,
        nodes: size,
        nodeBytes: byNode.bytes,
        nodesMs: median(byNode.whole),
        nodePageMs: median(byNode.page),
        hostBytes: byHost.bytes,
        hostsMs: median(byHost.whole),
        hostPageMs: median(byHost.page),
      };
      return [clusterRow, nodeRow] as const;
    });
    rows.push(clusterRow);
    nodeRows.push(nodeRow);
    process.stderr.write(`${JSON.stringify(clusterRow)}\n${JSON.stringify(nodeRow)}\n`);
  }
  return { clusters: rows, nodes: nodeRows };
}

const pg = await startPostgres();
try {
  const onSqlite = await growth("sqlite", undefined);
  const onPostgres = await growth("postgres", await pg.createDatabase());
  const rows = [...onSqlite.clusters, ...onPostgres.clusters];
  const nodeRows = [...onSqlite.nodes, ...onPostgres.nodes];
  process.stdout.write(
    markdownTable(
      [
        "store",
        "clusters",
        "list MB",
        "first list ms",
        "cached ms",
        "after a write ms",
        "ms per 1,000 (after a write)",
        `page of ${PAGE} after a write ms`,
        "idle RSS MiB",
        "RSS after MiB",
      ],
      rows.map((r) => [
        r.store,
        String(r.clusters),
        (r.bytes / 1e6).toFixed(1),
        r.firstMs.toFixed(0),
        r.cachedMs.toFixed(0),
        r.afterWriteMs.toFixed(0),
        ((r.afterWriteMs / r.clusters) * 1000).toFixed(1),
        r.pageMs.toFixed(0),
        r.idleRssMiB.toFixed(0),
        r.rssMiB.toFixed(0),
      ]),
    ),
  );
  process.stdout.write("\n");
  process.stdout.write(
    markdownTable(
      [
        "store",
        "nodes",
        "node list MB",
        "node list ms",
        "ms per 1,000",
        `node page of ${PAGE} ms`,
        "host list MB",
        "host list ms",
        "ms per 1,000",
        `host page of ${PAGE} ms`,
      ],
      nodeRows.map((r) => [
        r.store,
        String(r.nodes),
        (r.nodeBytes / 1e6).toFixed(1),
        r.nodesMs.toFixed(0),
        ((r.nodesMs / r.nodes) * 1000).toFixed(1),
        r.nodePageMs.toFixed(0),
        (r.hostBytes / 1e6).toFixed(1),
        r.hostsMs.toFixed(0),
        ((r.hostsMs / r.nodes) * 1000).toFixed(1),
        r.hostPageMs.toFixed(0),
      ]),
    ),
  );
  process.stdout.write(
    "\nLinear growth keeps 'ms per 1,000' flat across sizes; RSS after minus idle is the list's memory (its text and the cached bytes). A page read in SQL stays flat as its list grows.\n",
  );
} finally {
  await pg.stop();
}
