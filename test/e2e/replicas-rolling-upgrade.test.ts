import { readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packRelease } from "../../scripts/pack-release.ts";
import { type Simulator, startSimulator } from "../sim/index.ts";
import { dropDatabase } from "../support/postgres-database.ts";
import { api, freePort, tempDir, waitUntil } from "./support/processes.ts";
import { installDatabase } from "./support/release-database.ts";
import { deriveRelease, keelson, stopInstalled } from "./support/releases.ts";

/**
 * Issue 17's rolling upgrade of the replicas, on PostgreSQL only (the e2e project leaves it out:
 * SQLite serves one replica), as an operator runs it (README "Rolling upgrade of the replicas"):
 * two replicas of release A installed with `keelson install control-plane` under two roots on
 * one database (the second with the first's secrets key), three simulated agents listing both
 * URLs, two clusters, and an operation of a kind release A does not know, which neither replica
 * claims (what a newer kind waits for during a rolling upgrade; a newer replica claiming it is
 * operation-leases.test.ts's). `keelson upgrade` moves replica cp-1 to B while cp-2 (A) serves: its API
 * answers throughout, takes a write, the agents move to it; then cp-2, still A, works on the
 * schema B migrated and restarts on it, which is what an expand-only migration promises; then
 * cp-2 is upgraded the same way. At the end both run B, every agent is linked, the data is
 * intact and migrated. Then the per-replica rule: an upgrade of one replica that fails switches
 * that replica back without restoring the shared database, and `keelson rollback` refuses while
 * another replica runs.
 *
 * Release B's migration here is expand-only (a nullable column, filled in): unlike the one of
 * release-upgrade.test.ts it does not raise keelson_schema.min_binary_version, which would stop a
 * replica of A from starting again on the migrated database (a contract step belongs in a later
 * release, once no replica runs A).
 */

const A = "0.2.0";
const B = "0.3.0";
const BROKEN = "0.3.1";
const work = tempDir("keelson-rolling-");
const location = join(work, "location");
const roots = { "cp-1": join(work, "root-1"), "cp-2": join(work, "root-2") };
type ReplicaId = keyof typeof roots;
const urls = {} as Record<ReplicaId, string>;
let admin = "";
let projectId = "";
let sim: Simulator | undefined;
let pg: { url: string; bare: string; passwordFile: string } | undefined;

afterAll(async () => {
  await sim?.stop();
  for (const root of Object.values(roots)) await stopInstalled(root);
  if (pg) await dropDatabase(pg.url);
  rmSync(work, { recursive: true, force: true });
}, 180_000);

beforeAll(async () => {
  const packed = await packRelease({ version: A, out: location, tarball: false });
  const expandOnly = [
    'ALTER TABLE "clusters" ADD COLUMN "rolling_note" text;',
    `UPDATE "clusters" SET "rolling_note" = 'migrated by ${B}: ' || "name";`,
  ].join("\n--> statement-breakpoint\n");
  const b = deriveRelease(packed.dir, location, B, {
    name: "rolling_b",
    sqlite: expandOnly.replaceAll('"', "`"),
    postgres: expandOnly,
  });
  // After B's migration in the journal, so the migrator runs it on a database B migrated.
  deriveRelease(b, location, BROKEN, {
    name: "broken",
    sqlite: "CREATE TABLE `half` (;",
    postgres: 'CREATE TABLE "half" (;',
  });
  pg = await installDatabase(work);
}, 180_000);

async function readDb<T>(query: string): Promise<T[]> {
  const sql = postgres((pg as { url: string }).url, { max: 1, onnotice: () => {} });
  try {
    return Array.from(await sql.unsafe(query), (row) => ({ ...row }) as T);
  } finally {
    await sql.end();
  }
}

interface Replica {
  id: string;
  version: string;
  live: boolean;
  agentsHeld: number;
  self: boolean;
}
const replicasOn = async (id: ReplicaId) => (await api<Replica[]>(`${urls[id]}/v1/replicas`, admin)).body;
const held = async (id: ReplicaId) => (await replicasOn(id)).find((r) => r.id === id)?.agentsHeld ?? 0;
const clusterNames = async (id: ReplicaId) =>
  (await api<{ name: string }[]>(`${urls[id]}/v4/${projectId}/clusters`, admin)).body.map((c) => c.name).sort();
const current = (id: ReplicaId) => readlinkSync(join(roots[id], "opt", "keelson", "current"));
const upgradeConfig = (version: string) => {
  const file = join(work, `upgrade-${version}.yaml`);
  writeFileSync(
    file,
    `version: ${version}\nreadyTimeoutSeconds: 90\nagentsTimeoutSeconds: 90\ntrialWindowSeconds: 3\n`,
  );
  return file;
};

/**
 * Asks `id`'s API (/readyz and a list) every 200 ms until stopped; what failed, and the longest
 * time the simulated fleet had an agent without a link.
 */
function watch(id: ReplicaId): () => Promise<{ asked: number; failures: string[]; longestUnlinkedMs: number }> {
  let stop = false;
  const failures: string[] = [];
  let asked = 0;
  let unlinkedSince: number | undefined;
  let longestUnlinkedMs = 0;
  const loop = (async () => {
    while (!stop) {
      for (const path of ["/readyz", `/v4/${projectId}/clusters`]) {
        try {
          const r = await api(`${urls[id]}${path}`, admin);
          if (r.status !== 200) failures.push(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
        } catch (err) {
          failures.push(`${path}: ${(err as Error).message}`);
        }
        asked += 1;
      }
      const all = sim?.connectedCount() === sim?.agents.length;
      if (!all && unlinkedSince === undefined) unlinkedSince = performance.now();
      if (all && unlinkedSince !== undefined) {
        longestUnlinkedMs = Math.max(longestUnlinkedMs, performance.now() - unlinkedSince);
        unlinkedSince = undefined;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return async () => {
    stop = true;
    await loop;
    return { asked, failures, longestUnlinkedMs: Math.round(longestUnlinkedMs) };
  };
}

/** `keelson upgrade` of cp-1 while cp-2's API is watched; once cp-1 is down, a cluster created through cp-2. */
async function upgradeCp1WritingThroughCp2(config: string, cluster: string) {
  const watched = watch("cp-2");
  const upgrade = keelson(["upgrade", "--config", config, "--root", roots["cp-1"]]);
  const down = async () =>
    !(await fetch(`${urls["cp-1"]}/healthz`).then(
      () => true,
      () => false,
    ));
  await waitUntil("cp-1 stopped", down, 60_000);
  const during = await api(`${urls["cp-2"]}/v4/${projectId}/clusters`, admin, {
    method: "POST",
    body: { name: cluster },
  });
  expect(during.status).toBe(200);
  return { up: await upgrade, seen: await watched() };
}

describe("a rolling upgrade of two replicas on one PostgreSQL database, agents connected", () => {
  it("installs two replicas of A on one database: shared secrets, both live, agents listing both", async () => {
    const db = ["--database-url", pg?.bare as string, "--database-password-file", pg?.passwordFile as string];
    for (const id of Object.keys(roots) as ReplicaId[]) {
      const port = await freePort();
      const key = id === "cp-1" ? [] : ["--secrets-key-file", join(roots["cp-1"], "etc", "keelson", "secrets.key")];
      const run = await keelson([
        ...["install", "control-plane", "--root", roots[id], "--release", join(location, `keelson-${A}`)],
        ...["--listen", `127.0.0.1:${port}`, "--release-location", location, "--replica-id", id, ...db, ...key],
      ]);
      expect(run.code, run.stderr).toBe(0);
      expect(readFileSync(join(roots[id], "etc", "keelson", "server.env"), "utf8")).toContain(
        `KEELSON_REPLICA_ID=${id}\n`,
      );
      urls[id] = `http://127.0.0.1:${port}`;
    }
    const token = (id: ReplicaId) => readFileSync(join(roots[id], "var", "lib", "keelson", "admin-token"), "utf8");
    admin = token("cp-1").trim();
    expect(token("cp-2").trim()).toBe(admin);
    expect((await replicasOn("cp-2")).map((r) => [r.id, r.version, r.live, r.self])).toEqual([
      ["cp-1", A, true, false],
      ["cp-2", A, true, true],
    ]);
    const bad = await keelson(["install", "control-plane", "--root", join(work, "bad"), "--replica-id", "_x"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--replica-id: 1-63 letters, digits, dots, dashes or underscores");

    const projects = await api<{ projects: { id: string; name: string }[] }>(`${urls["cp-1"]}/v1/projects`, admin);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    for (const name of ["alpha", "beta"])
      expect(
        (await api(`${urls["cp-1"]}/v4/${projectId}/clusters`, admin, { method: "POST", body: { name } })).status,
      ).toBe(200);
    // Every agent starts at cp-1 (random 0: the first URL), so cp-1's upgrade must move them all.
    sim = await startSimulator({
      url: urls["cp-1"],
      linkUrl: [urls["cp-1"], urls["cp-2"]].map((u) => `${u.replace(/^http/, "ws")}/v1/agents/link`),
      random: () => 0,
      count: 3,
      adminToken: admin,
      projectId,
      concurrency: 3,
    });
    await waitUntil("the three agents on cp-1", async () => (await held("cp-1")) === 3, 30_000);

    // An operation of a kind these releases do not know (as a newer release would record it):
    // neither replica claims it, through several renewals (every 2 s), nor runs or fails it.
    await readDb(
      `insert into operations (id, project_id, kind, target_type, target_id, params) values ('op-newer-kind', '${projectId}', 'rolling.newer-kind', 'cluster', 'no-such-cluster', '{}')`,
    );
    await new Promise((r) => setTimeout(r, 5_000));
    expect(
      await readDb("select state, owner, attempts, fence, error from operations where id = 'op-newer-kind'"),
    ).toEqual([{ state: "pending", owner: null, attempts: 0, fence: 0, error: null }]);
  }, 240_000);

  it("upgrades cp-1 to B while cp-2 (A) serves: its API answers throughout, takes writes, and holds the agents", async () => {
    expect((await keelson(["download", "-", B, "--root", roots["cp-1"]])).code).toBe(0);
    const config = upgradeConfig(B);
    const plan = await keelson(["upgrade", "--config", config, "--root", roots["cp-1"], "--plan"]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stderr).toContain(`other live replicas on this database: cp-2 (${A} at ${urls["cp-2"]})`);
    expect(plan.stderr).toContain("the shared database is never restored while other replicas run on it");

    const { up, seen } = await upgradeCp1WritingThroughCp2(config, "made-during-upgrade");
    process.stderr.write(`cp-2 while cp-1 upgraded: ${JSON.stringify(seen)}\n`);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stderr).toContain(`upgraded keelson-server from ${A} to ${B}; this replica's API was unavailable`);
    expect(seen.failures).toEqual([]);
    expect(seen.asked).toBeGreaterThan(10);
    expect(current("cp-1")).toBe(join("releases", B));
    // The agents moved to cp-2 when cp-1 stopped, and stay there.
    expect(await held("cp-2")).toBe(3);
    expect(sim?.connectedCount()).toBe(3);
    expect((await replicasOn("cp-2")).map((r) => [r.id, r.version, r.live])).toEqual([
      ["cp-1", B, true],
      ["cp-2", A, true],
    ]);
    expect(
      await readDb<{ name: string; note: string }>(
        "select name, rolling_note as note from clusters where name in ('alpha', 'beta') order by name",
      ),
    ).toEqual([
      { name: "alpha", note: `migrated by ${B}: alpha` },
      { name: "beta", note: `migrated by ${B}: beta` },
    ]);
  }, 300_000);

  it("cp-2, still A, works on the migrated schema and starts again on it (the migration is expand-only)", async () => {
    const made = await api<{ uuid: string }>(`${urls["cp-2"]}/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: { name: "made-on-a-after-migration" },
    });
    expect(made.status).toBe(200);
    expect(await clusterNames("cp-2")).toEqual(["alpha", "beta", "made-during-upgrade", "made-on-a-after-migration"]);
    expect(await clusterNames("cp-1")).toEqual(await clusterNames("cp-2"));
    expect((await keelson(["stop", "--root", roots["cp-2"]])).code).toBe(0);
    const again = await keelson(["advanced-ddu", "scale-du", "up", "--root", roots["cp-2"]]);
    expect(again.code, again.stderr).toBe(0);
    expect(current("cp-2")).toBe(join("releases", A));
    expect((await replicasOn("cp-2")).find((r) => r.self)?.version).toBe(A);
    // The agents moved to cp-1 (B) while cp-2 was down.
    await waitUntil("every agent linked", async () => (await held("cp-1")) + (await held("cp-2")) === 3, 60_000);
  }, 240_000);

  it("upgrades cp-2 the same way while cp-1 serves; both run B, every agent linked, the data intact", async () => {
    expect((await keelson(["download", "-", B, "--root", roots["cp-2"]])).code).toBe(0);
    const watched = watch("cp-1");
    const up = await keelson(["upgrade", "--config", upgradeConfig(B), "--root", roots["cp-2"]]);
    const seen = await watched();
    process.stderr.write(`cp-1 while cp-2 upgraded: ${JSON.stringify(seen)}\n`);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stderr).toContain(`other live replicas on this database: cp-1 (${B} at ${urls["cp-1"]})`);
    // cp-1 applied B's migration when it started: cp-2 runs none.
    expect(up.stderr).toContain(`migrations to run at start: none (cp-1 runs ${B} and applied its 1; PostgreSQL)`);
    expect(seen.failures).toEqual([]);
    expect(current("cp-2")).toBe(join("releases", B));
    for (const id of Object.keys(roots) as ReplicaId[])
      expect((await replicasOn(id)).map((r) => [r.id, r.version, r.live])).toEqual([
        ["cp-1", B, true],
        ["cp-2", B, true],
      ]);
    await waitUntil("every agent linked", async () => (await held("cp-1")) + (await held("cp-2")) === 3, 60_000);
    expect(sim?.connectedCount()).toBe(3);
    expect(await clusterNames("cp-2")).toEqual(["alpha", "beta", "made-during-upgrade", "made-on-a-after-migration"]);
    // A row A wrote after the migration: the new column is nullable, and A does not know it.
    expect(
      await readDb<{ n: string }>("select rolling_note as n from clusters where name = 'made-on-a-after-migration'"),
    ).toEqual([{ n: null }]);
  }, 300_000);

  it("one replica's failed upgrade switches it back without restoring the shared database; rollback refuses while another replica runs", async () => {
    expect((await keelson(["download", "-", BROKEN, "--root", roots["cp-1"]])).code).toBe(0);
    // Written through cp-2 while cp-1 fails: a restore of the backup cp-1 took would lose it.
    const { up, seen } = await upgradeCp1WritingThroughCp2(upgradeConfig(BROKEN), "made-during-failed-upgrade");
    expect(up.code).toBe(1);
    expect(up.stderr).toContain(
      `upgrade to ${BROKEN} failed and this replica was switched back to ${B}; the shared database was not restored (replicas cp-2 run on it`,
    );
    expect(up.stderr).toMatch(/0\.3\.1 did not start: .*syntax error at or near ";"/);
    expect(up.stderr).not.toContain("rollback: restore");
    expect(seen.failures).toEqual([]);
    expect(current("cp-1")).toBe(join("releases", B));
    expect((await api(`${urls["cp-1"]}/readyz`, admin)).status).toBe(200);
    expect(await clusterNames("cp-1")).toContain("made-during-failed-upgrade");

    const backups = join(roots["cp-1"], "var", "lib", "keelson", "backups");
    const backupDir = up.stderr.match(/keelson rollback --dir (\S+)\)/)?.[1] as string;
    expect(backupDir.startsWith(backups)).toBe(true);
    const back = await keelson(["rollback", "--dir", backupDir, "--root", roots["cp-1"]]);
    expect(back.code).toBe(1);
    expect(back.stderr).toContain(
      `rollback refused: other replicas run on this database: cp-2 (${B} at ${urls["cp-2"]}). A rollback restores the shared database: stop every other replica first`,
    );
    expect(current("cp-1")).toBe(join("releases", B));
    expect((await api(`${urls["cp-1"]}/readyz`, admin)).status).toBe(200);
    expect(await clusterNames("cp-2")).toContain("made-during-failed-upgrade");
    await waitUntil("every agent linked", async () => (await held("cp-1")) + (await held("cp-2")) === 3, 60_000);
  }, 300_000);
});
