import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sourcesDigest } from "../../packages/control-plane/bin/bundle.mjs";
import { openSqliteConnection } from "../../packages/db/src/index.ts";
import { packRelease } from "../../scripts/pack-release.ts";
import { type Simulator, startSimulator } from "../sim/index.ts";
import { dropDatabase } from "../support/postgres-database.ts";
import { api, freePort, serverDialect, tempDir, waitUntil } from "./support/processes.ts";
import { installDatabase } from "./support/release-database.ts";
import { deriveRelease, keelson, stopInstalled } from "./support/releases.ts";

/**
 * The control plane's life on real processes, as an operator runs it (README "Installing the
 * control plane", "Upgrading and rolling back"): release A packed from the workspace, installed
 * under a temporary root with the process supervisor; clusters and three simulated agents;
 * `keelson upgrade` to B (A plus a migration that changes data and raises keelson_schema), a
 * cluster created on B, `keelson rollback --dir` to A (A's database again, the cluster made on
 * B reported), then an upgrade to a release whose migration fails, which rolls back by itself.
 *
 * In the e2e-postgres project the same on PostgreSQL: installed with `--database-url` (a new,
 * empty database of the run's server, migrated by the install's first start) and
 * `--database-password-file`, so the backup is pg_dump's and the restore pg_restore's.
 */

const A = "0.2.0";
const B = "0.3.0";
const BROKEN = "0.3.1";
const work = tempDir("keelson-release-");
const root = join(work, "root");
const location = join(work, "location");
const data = join(root, "var", "lib", "keelson");
let url = "";
let admin = "";
let projectId = "";
let sim: Simulator | undefined;
const dialect = serverDialect();
/** PostgreSQL: the database's URL with its password (for the test's own reads), and without. */
let pg: { url: string; bare: string; passwordFile: string } | undefined;

async function stopEverything(): Promise<void> {
  await sim?.stop();
  await stopInstalled(root);
}

afterAll(async () => {
  const t0 = performance.now();
  await stopEverything();
  const t1 = performance.now();
  if (pg) await dropDatabase(pg.url);
  rmSync(work, { recursive: true, force: true });
  process.stderr.write(
    `cleanup: stop ${Math.round(t1 - t0)} ms, remove ${Math.round(performance.now() - t1)} ms` + "\n",
  );
}, 180_000);

/** Rows of a query on the installed server's database, read directly. */
async function readDb<T>(query: string): Promise<T[]> {
  if (pg) {
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      return Array.from(await sql.unsafe(query), (row) => ({ ...row }) as T);
    } finally {
      await sql.end();
    }
  }
  const db = openSqliteConnection(join(data, "keelson.sqlite"));
  try {
    return db.prepare(query).all() as T[];
  } finally {
    db.close();
  }
}

const clusterColumns = async () =>
  (
    await readDb<{ name: string }>(
      pg
        ? "select column_name as name from information_schema.columns where table_name = 'clusters'"
        : "select name from pragma_table_info('clusters')",
    )
  ).map((c) => c.name);

const clusterNames = async () =>
  (await api<{ name: string }[]>(`${url}/v4/${projectId}/clusters`, admin)).body.map((c) => c.name).sort();
const agentLinks = async () =>
  (await api<{ agentLinks: { open: number } }>(`${url}/readyz`, admin)).body.agentLinks.open;

beforeAll(async () => {
  const t0 = performance.now();
  const packed = await packRelease({ version: A, out: location, tarball: false });
  const statements = (quote: string) =>
    [
      "ALTER TABLE `clusters` ADD COLUMN `release_b_note` text;",
      "UPDATE `clusters` SET `release_b_note` = 'migrated by 0.3.0: ' || `name`;",
      "UPDATE `keelson_schema` SET `min_binary_version` = '0.3.0';",
    ]
      .join("\n--> statement-breakpoint\n")
      .replaceAll("`", quote);
  deriveRelease(packed.dir, location, B, { name: "release_b", sqlite: statements("`"), postgres: statements('"') });
  deriveRelease(packed.dir, location, BROKEN, {
    name: "broken",
    sqlite: "CREATE TABLE `half` (;",
    postgres: 'CREATE TABLE "half" (;',
  });
  if (dialect === "postgres") pg = await installDatabase(work);
  process.stderr.write(
    `releases packed in ${Math.round(performance.now() - t0)} ms (${JSON.stringify(packed.seconds)})` + "\n",
  );
}, 180_000);

describe(`the control plane's install, upgrade and rollback (${dialect})`, () => {
  const installA = ["install", "control-plane", "--root", root, "--release", join(location, `keelson-${A}`)];
  const database = () => (pg ? ["--database-url", pg.bare, "--database-password-file", pg.passwordFile] : []);
  it("installs release A under a root: unit verified, data dir 0700, admin token 0600, ready", async () => {
    const port = await freePort();
    const run = await keelson([
      ...installA,
      "--listen",
      `127.0.0.1:${port}`,
      "--release-location",
      location,
      ...database(),
    ]);
    expect(run.code, run.stderr).toBe(0);
    if (pg) {
      expect(readFileSync(join(root, "etc", "keelson", "server.env"), "utf8")).toContain(
        `KEELSON_DATABASE_URL=${pg.bare}`,
      );
      expect(existsSync(join(data, "keelson.sqlite"))).toBe(false);
    }
    expect(run.stdout).toContain("config set-context admin");
    url = `http://127.0.0.1:${port}`;
    expect(statSync(data).mode & 0o777).toBe(0o700);
    expect(statSync(join(data, "admin-token")).mode & 0o777).toBe(0o600);
    admin = readFileSync(join(data, "admin-token"), "utf8").trim();
    expect(readlinkSync(join(root, "opt", "keelson", "current"))).toBe(join("releases", A));
    // The server runs the bundle the release ships: its start built none (bin/bundle.mjs).
    const serverPackage = join(root, "opt", "keelson", "releases", A, "packages", "control-plane");
    expect(readdirSync(join(serverPackage, "dist"))).toEqual([sourcesDigest(serverPackage)]);
    // systemd's own check of the unit as installed (exit 0, nothing on stderr).
    const verify = execFileSync(
      "systemd-analyze",
      ["verify", join(root, "etc/systemd/system/keelson-server.service")],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    expect(verify).toBe("");
    // The unit runs as the service user, made by the real useradd in the root's own passwd
    // (the supervisor stands in for systemd here and runs the server as this test's user).
    expect(readFileSync(join(root, "etc/systemd/system/keelson-server.service"), "utf8")).toMatch(
      /^User=keelson\nGroup=keelson$/m,
    );
    expect(readFileSync(join(root, "etc", "passwd"), "utf8")).toMatch(
      /^keelson:[x!]:\d+:\d+:.*:\/usr\/sbin\/nologin$/m,
    );
    expect(run.stderr).toMatch(/service user: keelson \(uid \d+\) created/);
    // Again: idempotent, keeps the admin token.
    const again = await keelson(installA);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("kept as it is");
    expect(again.stderr).toMatch(/service user: keelson \(uid \d+\) exists/);
    expect(readFileSync(join(data, "admin-token"), "utf8").trim()).toBe(admin);

    const projects = await api<{ projects: { id: string; name: string }[] }>(`${url}/v1/projects`, admin);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    for (const name of ["alpha", "beta"]) {
      const created = await api(`${url}/v4/${projectId}/clusters`, admin, { method: "POST", body: { name } });
      expect(created.status).toBe(200);
    }
    sim = await startSimulator({ url, count: 3, adminToken: admin, projectId, concurrency: 3 });
    expect(sim.connectedCount()).toBe(3);
  }, 180_000);

  let backupDir = "";
  it("upgrades to B: planned first without a change, then backup, migration, agents back", async () => {
    const config = join(work, "upgrade-b.yaml");
    writeFileSync(config, `version: ${B}\nreadyTimeoutSeconds: 60\nagentsTimeoutSeconds: 90\ntrialWindowSeconds: 3\n`);
    const refused = await keelson(["upgrade", "--config", config, "--root", root, "--plan"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`release ${B} is not downloaded`);
    const download = await keelson(["download", "-", B, "--root", root]);
    expect(download.code, download.stderr).toBe(0);
    const plan = await keelson(["upgrade", "--config", config, "--root", root, "--plan"]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stderr).toContain(`migrations to run at start: 1 (${pg ? "PostgreSQL" : "SQLite"})`);
    expect(plan.stderr).toContain("nothing was changed");
    expect(readlinkSync(join(root, "opt", "keelson", "current"))).toBe(join("releases", A));

    const up = await keelson(["upgrade", "--config", config, "--root", root]);
    expect(up.code, up.stderr).toBe(0);
    backupDir = up.stdout.trim();
    expect(existsSync(join(backupDir, pg ? "keelson.pgdump" : "keelson.sqlite"))).toBe(true);
    expect(JSON.parse(readFileSync(join(backupDir, "manifest.json"), "utf8")).dialect).toBe(dialect);
    expect(up.stderr).toContain(`upgraded keelson-server from ${A} to ${B}`);
    expect(readlinkSync(join(root, "opt", "keelson", "current"))).toBe(join("releases", B));
    expect(await clusterNames()).toEqual(["alpha", "beta"]);
    expect(
      (await readDb<{ n: string }>("select release_b_note as n from clusters order by name")).map((r) => r.n),
    ).toEqual(["migrated by 0.3.0: alpha", "migrated by 0.3.0: beta"]);
    await waitUntil("the three agents back on B", async () => (await agentLinks()) === 3, 60_000);
    // Idempotent: a second run finds B current.
    const again = await keelson(["upgrade", "--config", config, "--root", root]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("nothing to do");
  }, 240_000);

  it("rolls back to A with the backup: A's database again, agents back, the cluster made on B reported", async () => {
    const made = await api(`${url}/v4/${projectId}/clusters`, admin, { method: "POST", body: { name: "made-on-b" } });
    expect(made.status).toBe(200);
    const back = await keelson(["rollback", "--dir", backupDir, "--root", root, "--agents-timeout-seconds", "90"]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toContain("cluster made-on-b");
    expect(back.stdout).toContain("destroy");
    expect(readlinkSync(join(root, "opt", "keelson", "current"))).toBe(join("releases", A));
    expect(await clusterNames()).toEqual(["alpha", "beta"]);
    expect(await clusterColumns()).not.toContain("release_b_note");
    expect(await clusterColumns()).toContain("name");
    expect(await readDb<{ v: string }>("select min_binary_version as v from keelson_schema")).toEqual([{ v: "0.1.0" }]);
    await waitUntil("the three agents back on A", async () => (await agentLinks()) === 3, 60_000);
  }, 240_000);

  it("an upgrade to a release that fails at start rolls back by itself and names what failed", async () => {
    const config = join(work, "upgrade-broken.yaml");
    writeFileSync(
      config,
      `version: ${BROKEN}\nreadyTimeoutSeconds: 60\nagentsTimeoutSeconds: 60\ntrialWindowSeconds: 3\n`,
    );
    expect((await keelson(["download", "-", BROKEN, "--root", root])).code).toBe(0);
    const up = await keelson(["upgrade", "--config", config, "--root", root]);
    expect(up.code).toBe(1);
    expect(up.stderr).toContain(`upgrade to ${BROKEN} failed and was rolled back to ${A}`);
    expect(up.stderr).toContain(`keelson-server ${BROKEN} did not start`);
    // What failed, from the new release's own output: the migration SQLite refused.
    expect(up.stderr).toMatch(
      pg
        ? /0\.3\.1 did not start: DrizzleQueryError: Failed query: CREATE TABLE "half" \(;; cause: PostgresError: syntax error at or near ";"/
        : /0\.3\.1 did not start: DrizzleError: Failed to run the query 'CREATE TABLE `half` \(;'/,
    );
    expect(readlinkSync(join(root, "opt", "keelson", "current"))).toBe(join("releases", A));
    expect(await clusterNames()).toEqual(["alpha", "beta"]);
    await waitUntil("the three agents back on A", async () => (await agentLinks()) === 3, 60_000);
  }, 240_000);

  it("stop and scale-du up: each idempotent", async () => {
    expect((await keelson(["stop", "--root", root])).code).toBe(0);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    const twice = await keelson(["stop", "--root", root]);
    expect(twice.code).toBe(0);
    expect(twice.stderr).toContain("nothing to stop");
    const up = await keelson(["advanced-ddu", "scale-du", "up", "--root", root]);
    expect(up.code, up.stderr).toBe(0);
    expect((await api(`${url}/readyz`, admin)).status).toBe(200);
  }, 120_000);

  it("configure-localhost: the server comes back on the new address and port; a re-run changes nothing", async () => {
    const port = await freePort();
    const args = ["configure-localhost", "--ipv4", "127.0.0.2", "--port", String(port), "--root", root];
    const envFile = join(root, "etc", "keelson", "server.env");
    const supervisor = () =>
      (
        JSON.parse(readFileSync(join(root, "run", "keelson", "supervisor.json"), "utf8")) as {
          serverPid: number | null;
        }
      ).serverPid;
    const pidBefore = supervisor();
    const run = await keelson(args, 180_000);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(new RegExp(`KEELSON_LISTEN: 127\\.0\\.0\\.1:\\d+ -> 127\\.0\\.0\\.2:${port}`));
    expect(readFileSync(envFile, "utf8")).toContain(`KEELSON_LISTEN=127.0.0.2:${port}\n`);
    // A new process on the new listener, the old address closed, the same data behind it.
    expect(supervisor()).not.toBe(pidBefore);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    const moved = `http://127.0.0.2:${port}`;
    expect((await api(`${moved}/readyz`, admin)).status).toBe(200);
    url = moved;
    expect(await clusterNames()).toContain("alpha");

    const envBefore = readFileSync(envFile, "utf8");
    const pid = supervisor();
    const again = await keelson(args, 60_000);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("has these settings already: nothing to do");
    expect(readFileSync(envFile, "utf8")).toBe(envBefore);
    expect(supervisor()).toBe(pid);
    expect((await api(`${moved}/readyz`, admin)).status).toBe(200);
  }, 240_000);
});
