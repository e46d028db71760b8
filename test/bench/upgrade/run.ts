/**
 * `pnpm bench upgrade`: the control plane's upgrade (`keelson upgrade`: stop → backup → switch →
 * start and migrate → agents back) and its rollback (`keelson rollback --dir`), each step timed,
 * with 0, 100 and 1,000 clusters and as many simulated agents, beside two baselines measured in
 * the same run on the same data: a plain stop and start of the same release (and its agents
 * back), and a bare copy of the stopped database file (what the backup step costs at least).
 *
 * Release A is packed from the workspace and B derived from it with one migration per dialect
 * that rewrites every cluster row (as a real release's data migration would), both installed
 * under a temporary root with the process supervisor, exactly as the e2e test and an operator
 * without systemd run them. The CLI's own functions run in this process; the server, its
 * supervisor and the backup/restore commands are real processes. The trial window is 0 here
 * (a fixed wait that would only add itself).
 *
 * BENCH_CLUSTERS=0,100,1000  the sizes; BENCH_AGENTS=N  agents per size (default: as many as
 * clusters); BENCH_DIALECT=postgres  on a PostgreSQL server the bench starts (no bare copy then).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectedHosts, waitHostsBack } from "../../../packages/cli/src/release/agents-back.ts";
import {
  installControlPlane,
  placeRelease,
  type Say,
  startAndWait,
} from "../../../packages/cli/src/release/install.ts";
import { layoutOf } from "../../../packages/cli/src/release/layout.ts";
import { serverApi } from "../../../packages/cli/src/release/server.ts";
import { serviceManager } from "../../../packages/cli/src/release/service.ts";
import { rollbackControlPlane, type Step, upgradeControlPlane } from "../../../packages/cli/src/release/upgrade.ts";
import { packRelease } from "../../../scripts/pack-release.ts";
import { deriveRelease } from "../../e2e/support/releases.ts";
import { type Simulator, startSimulator } from "../../sim/index.ts";
import { type PostgresServer, startPostgres } from "../../support/postgres.ts";
import { apiAs, freePort } from "../support/admin-api.ts";

const SIZES = (process.env.BENCH_CLUSTERS ?? "0,100,1000").split(",").map(Number);
const AGENTS = process.env.BENCH_AGENTS === undefined ? undefined : Number(process.env.BENCH_AGENTS);
const DIALECT = process.env.BENCH_DIALECT === "postgres" ? "postgres" : "sqlite";
const A = "0.2.0";
const B = "0.3.0";
const PATH = process.env.PATH ?? "/usr/bin:/bin";

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}
const quiet: Say = { note: () => {}, print: () => {} };
const seconds = (t0: number) => Math.round(performance.now() - t0) / 1000;

const work = mkdtempSync(join(tmpdir(), "keelson-bench-upgrade-"));
const layout = layoutOf(join(work, "root"));
const service = serviceManager(layout, PATH);
const sims: Simulator[] = [];
let pg: PostgresServer | undefined;

/** The clusters of the default project up to `count`, created through the API, 8 at a time. */
async function growClusters(base: string, admin: string, projectId: string, from: number, to: number): Promise<void> {
  const api = apiAs(admin);
  let next = from;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < to) {
        const name = `c${String(next++).padStart(5, "0")}`;
        const res = await api(`${base}/v4/${projectId}/clusters`, { method: "POST", body: { name } });
        if (res.status !== 200) throw new Error(`create ${name}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }),
  );
}

/** The baseline: the same release stopped and started on the same data, with its agents back. */
async function plainRestart(): Promise<Step[]> {
  const api = serverApi(layout);
  const hosts = (await connectedHosts(api)).map((h) => h.id);
  await api.close();
  const steps: Step[] = [];
  let t0 = performance.now();
  await service.stop();
  steps.push({ name: "stop", seconds: seconds(t0) });
  if (DIALECT === "sqlite") {
    t0 = performance.now();
    copyFileSync(join(layout.dataDir, "keelson.sqlite"), join(work, "bare-copy.sqlite"));
    steps.push({ name: "bare copy of the database file", seconds: seconds(t0) });
    rmSync(join(work, "bare-copy.sqlite"));
  }
  t0 = performance.now();
  const ready = await startAndWait(layout, service, 300_000);
  if (!ready.ready) throw new Error(`the plain restart did not become ready: ${ready.status}`);
  steps.push({ name: "start", seconds: seconds(t0) });
  t0 = performance.now();
  const back = serverApi(layout);
  const missing = await waitHostsBack(back, hosts, 600);
  await back.close();
  if (missing) throw new Error(`plain restart: ${missing}`);
  steps.push({ name: "agents back", seconds: seconds(t0) });
  return steps;
}

function printSteps(title: string, steps: Step[], extra = ""): void {
  const total = steps.reduce((s, x) => s + x.seconds, 0);
  log(`  ${title}: total ${total.toFixed(3)} s${extra}`);
  for (const s of steps) log(`    ${s.name.padEnd(32)} ${s.seconds.toFixed(3).padStart(8)} s`);
}

try {
  let t0 = performance.now();
  const packed = await packRelease({ version: A, out: work, tarball: false });
  const statements = (quote: string) =>
    [
      "ALTER TABLE `clusters` ADD COLUMN `bench_b_note` text;",
      "UPDATE `clusters` SET `bench_b_note` = 'migrated by 0.3.0: ' || `name`;",
    ]
      .join("\n--> statement-breakpoint\n")
      .replaceAll("`", quote);
  const derived = deriveRelease(packed.dir, work, B, {
    name: "bench_b",
    sqlite: statements("`"),
    postgres: statements('"'),
  });
  log(`releases ${A} and ${B} packed in ${seconds(t0)} s; dialect ${DIALECT}; sizes ${SIZES.join(", ")}`);

  let databaseUrl: string | undefined;
  if (DIALECT === "postgres") {
    pg = await startPostgres();
    databaseUrl = await pg.createDatabase();
  }
  const port = await freePort();
  t0 = performance.now();
  await installControlPlane(layout, service, { release: packed.dir, listen: `127.0.0.1:${port}`, databaseUrl }, quiet);
  placeRelease(layout, derived, quiet);
  log(`installed ${A} under ${layout.root} and placed ${B} in ${seconds(t0)} s`);
  const base = `http://127.0.0.1:${port}`;
  const admin = readFileSync(join(layout.dataDir, "admin-token"), "utf8").trim();
  const projects = await apiAs(admin)<{ projects: { id: string; name: string }[] }>(`${base}/v1/projects`);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;

  let clusters = 0;
  let agents = 0;
  for (const [i, size] of SIZES.entries()) {
    const wantAgents = AGENTS ?? size;
    t0 = performance.now();
    await growClusters(base, admin, projectId, clusters, size);
    clusters = Math.max(clusters, size);
    if (wantAgents > agents) {
      sims.push(
        await startSimulator({
          url: base,
          count: wantAgents - agents,
          adminToken: admin,
          projectId,
          namePrefix: `sim${i}`,
          connectTimeoutMs: 600_000,
        }),
      );
      agents = wantAgents;
    }
    log(`== ${clusters} clusters, ${agents} agents (set up in ${seconds(t0)} s)`);

    const plain = await plainRestart();
    printSteps(`baseline: plain stop and start of ${A}`, plain);

    const config = {
      version: B,
      readyTimeoutSeconds: 300,
      agentsTimeoutSeconds: 600,
      trialWindowSeconds: 0,
      backupDir: join(work, `backup-${size}`),
    };
    const up = await upgradeControlPlane(layout, config, service, PATH, quiet);
    if (!up) throw new Error("the upgrade found nothing to do");
    printSteps(`keelson upgrade ${A} -> ${B}`, up.steps, `; API unavailable ${up.unavailableSeconds} s`);

    const back = await rollbackControlPlane(layout, up.backupDir, service, PATH, 600, quiet);
    const down = back.steps.filter((s) => s.name.startsWith("rollback:")).reduce((t, s) => t + s.seconds, 0);
    printSteps(`keelson rollback --dir (to ${A})`, back.steps, `; API unavailable ${down.toFixed(3)} s`);
    rmSync(up.backupDir, { recursive: true, force: true });
  }
} finally {
  for (const sim of sims) await sim.stop();
  await service.stop();
  await pg?.stop();
  rmSync(work, { recursive: true, force: true });
}
