// `pnpm bench console`: the first load of the web console's cluster page in headless Chromium,
// with 1,000 clusters in the project and a 500-node cluster (1 master, 499 workers, every node
// with its full phase report), against the baseline of the same page's raw API calls made from
// Node in the same run. Also the clusters page (the list of 1,000). Each load is a fresh browser
// context (empty cache); BENCH_LOADS (default 3) loads each, the median printed. Prints figures;
// never fails on a time.
//
// Clusters are created through the API; the 500 nodes are seeded through the store while the
// server is stopped (as the agents' reports would leave them), since 500 real agents do not fit
// on this machine.
import { randomUUID } from "node:crypto";
import type { Browser } from "playwright-core";
import { nodePools, nodes } from "../../../packages/db/src/schema.ts";
import { phasesForRole } from "../../../packages/protocol/src/phases.ts";
import { launchChromium } from "../../e2e/support/browser.ts";
import { api, openServerStore, type ServerProc, startServer } from "../../e2e/support/processes.ts";
import { median } from "../support/median.ts";

const CLUSTERS = Number(process.env.BENCH_CLUSTERS ?? 1000);
const NODES = Number(process.env.BENCH_NODES ?? 500);
const LOADS = Number(process.env.BENCH_LOADS ?? 3);

interface Load {
  ms: number;
  bytes: number;
  requests: number;
}

function phaseReport(role: "master" | "worker") {
  return phasesForRole(role).map((p, i) => ({
    id: p.id,
    name: p.name,
    order: p.order,
    state: p.id === "drain-pods" ? "not-started" : "running",
    lastError: null,
    message: null,
    startedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
    finishedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i + 1)).toISOString(),
    durationMs: 800 + i * 37,
  }));
}

async function seed(server: ServerProc): Promise<{ projectId: string; bigId: string }> {
  const admin = server.adminToken;
  const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  let bigId = "";
  for (let i = 0; i < CLUSTERS; i++) {
    const res = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: {
        name: `bench-${String(i).padStart(4, "0")}`,
        containersCidr: "10.20.0.0/16",
        servicesCidr: "10.21.0.0/16",
      },
    });
    if (res.status !== 200) throw new Error(`create ${i}: ${res.status} ${JSON.stringify(res.body)}`);
    if (i === 0) bigId = res.body.uuid;
  }
  return { projectId, bigId };
}

async function seedNodes(dataDir: string, projectId: string, clusterId: string): Promise<void> {
  const store = await openServerStore(dataDir);
  try {
    const poolId = (await store.db.select({ id: nodePools.id }).from(nodePools))[0]?.id as string;
    const master = phaseReport("master");
    const worker = phaseReport("worker");
    const rows = Array.from({ length: NODES }, (_, i) => {
      const ip = `10.${Math.floor(i / 250)}.${i % 250}.10`;
      const name = i === 0 ? "master-000" : `worker-${String(i).padStart(3, "0")}`;
      return {
        id: randomUUID(),
        projectId,
        nodePoolId: poolId,
        clusterId,
        name,
        primaryIp: ip,
        status: "ok",
        isMaster: i === 0 ? 1 : 0,
        apiResponding: i === 0 ? 1 : 0,
        facts: { hostname: name, primaryIp: ip, arch: "x64", os: { platform: "linux", distro: "Debian GNU/Linux" } },
        phases: i === 0 ? master : worker,
        agentVersion: "0.1.0",
        actualKubeRoleVersion: "1.31.4-kls.1",
      };
    });
    for (let i = 0; i < rows.length; i += 100) await store.db.insert(nodes).values(rows.slice(i, i + 100));
  } finally {
    await store.close();
  }
}

/** One first load of `hash` in a fresh context: until `ready` (a selector count) holds. */
async function browserLoad(
  browser: Browser,
  url: string,
  session: Record<string, string>,
  hash: string,
  ready: { selector: string; count: number },
): Promise<Load> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    await context.addInitScript(
      `sessionStorage.setItem("keelson.session", ${JSON.stringify(JSON.stringify(session))})`,
    );
    const page = await context.newPage();
    let bytes = 0;
    let requests = 0;
    page.on("requestfinished", async (request) => {
      const sizes = await request.sizes().catch(() => null);
      if (!sizes) return;
      requests++;
      bytes += sizes.responseBodySize + sizes.responseHeadersSize;
    });
    const started = Date.now();
    await page.goto(`${url}/ui/${hash}`);
    await page.waitForFunction(
      `document.querySelectorAll(${JSON.stringify(ready.selector)}).length >= ${ready.count}`,
      undefined,
      {
        timeout: 120_000,
        polling: 50,
      },
    );
    const ms = Date.now() - started;
    // The event stream never finishes; everything else has by now. Let the last sizes arrive.
    await page.waitForTimeout(300);
    return { ms, bytes, requests };
  } finally {
    await context.close();
  }
}

/** The same page's API calls from Node, in parallel as the page makes them: time and bytes. */
async function rawCalls(url: string, token: string, paths: string[]): Promise<Load> {
  const started = Date.now();
  const bodies = await Promise.all(
    paths.map(async (p) => {
      const res = await fetch(`${url}${p}`, { headers: { "x-auth-token": token } });
      if (!res.ok) throw new Error(`${p}: ${res.status}`);
      return Buffer.from(await res.arrayBuffer());
    }),
  );
  return { ms: Date.now() - started, bytes: bodies.reduce((n, b) => n + b.length, 0), requests: paths.length };
}

async function main(): Promise<void> {
  const env = { KEELSON_LOG_LEVEL: "error", NODE_ENV: "production" };
  let server = await startServer({ env });
  const { dataDir, adminToken } = server;
  const t0 = Date.now();
  const { projectId, bigId } = await seed(server);
  await server.stop();
  await seedNodes(dataDir, projectId, bigId);
  console.error(`seeded ${CLUSTERS} clusters and ${NODES} nodes in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  server = await startServer({ dataDir, adminToken, env });
  const chromium = await launchChromium();
  try {
    const session = {
      token: adminToken,
      projectId,
      projectName: "default",
      userName: "admin",
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    };
    const cases = [
      {
        label: `cluster page (${NODES} nodes)`,
        hash: `#/cluster/${bigId}`,
        ready: { selector: "li.node", count: NODES },
        paths: [
          `/v4/${projectId}/clusters/${bigId}`,
          `/v3/${projectId}/clusters/${bigId}`,
          `/v4/${projectId}/clusters/${bigId}/nodes`,
          "/v1/hosts",
        ],
      },
      {
        label: `clusters page (${CLUSTERS} clusters)`,
        hash: "#/clusters",
        ready: { selector: "tbody tr", count: CLUSTERS },
        paths: [`/v4/${projectId}/clusters`],
      },
    ];
    const rows: string[][] = [];
    for (const c of cases) {
      const page: Load[] = [];
      const raw: Load[] = [];
      // Turns, so a drifting machine load falls on both alike.
      for (let i = 0; i < LOADS; i++) {
        page.push(await browserLoad(chromium.browser, server.url, session, c.hash, c.ready));
        raw.push(await rawCalls(server.url, adminToken, c.paths));
      }
      const fmt = (loads: Load[], what: string) => [
        `${c.label}: ${what}`,
        String(median(loads.map((l) => l.ms))),
        (median(loads.map((l) => l.bytes)) / 1024).toFixed(0),
        String(median(loads.map((l) => l.requests))),
      ];
      rows.push(fmt(page, "console first load, to interactive"), fmt(raw, "raw API calls (baseline)"));
    }
    const header = ["case", "ms (median)", "KiB transferred", "requests"];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
    for (const line of [header, ...rows])
      process.stdout.write(`${line.map((cell, i) => cell.padEnd(widths[i] as number)).join("  ")}
`);
  } finally {
    await chromium.close();
    await server.stop();
  }
}

await main();
