import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../support/postgres.ts";
import { secretsKeyEnv } from "../support/secrets-key.ts";
import {
  api,
  freePort,
  logRecords,
  type Proc,
  type ServerProc,
  start,
  startServer,
  tempDir,
} from "./support/processes.ts";

/**
 * keelson-server on PostgreSQL as an operator runs it: the URL and a password file in the
 * environment, a database that is away at start or restarts under load. A server of its own
 * (not the run's shared one), since these tests stop and start it.
 */

let pg: PostgresServer;
const procs: Proc[] = [];
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  for (const p of procs) await p.stop("SIGKILL");
  await pg?.stop();
});

/** A new database's URL without its password, and the password in a file (mode 0600). */
async function databaseWithPasswordFile(): Promise<{ url: string; passwordFile: string; password: string }> {
  const withPassword = new URL(await pg.createDatabase());
  const password = decodeURIComponent(withPassword.password);
  withPassword.password = "";
  const passwordFile = join(tempDir("keelson-e2e-pgpass-"), "password");
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  return { url: withPassword.toString(), passwordFile, password };
}

/** Runs keelson-server with `env` until it exits by itself; its exit code and output. */
async function runToExit(env: Record<string, string>): Promise<{ code: number | string; output: string }> {
  const proc = start("npx", ["--no-install", "keelson-server"], {
    KEELSON_LISTEN: `127.0.0.1:${await freePort()}`,
    KEELSON_DATA_DIR: tempDir("keelson-e2e-pgfail-"),
    KEELSON_ADMIN_TOKEN: "e2e-admin-token",
    ...env,
  });
  procs.push(proc);
  return { code: await proc.exited, output: proc.output() };
}

describe("keelson-server on PostgreSQL", () => {
  let server: ServerProc;
  let db: Awaited<ReturnType<typeof databaseWithPasswordFile>>;
  let env: Record<string, string>;

  it("runs on KEELSON_DATABASE_URL with the password from a file, keeps data across a restart, never logs the password", async () => {
    db = await databaseWithPasswordFile();
    env = {
      KEELSON_DATABASE_URL: `${db.url}?sslmode=disable`,
      KEELSON_DATABASE_PASSWORD_FILE: db.passwordFile,
      ...secretsKeyEnv(),
      KEELSON_DATABASE_POOL_SIZE: "4",
      KEELSON_LOG_LEVEL: "info",
    };
    server = await startServer({ env });
    procs.push(server);
    const ready = logRecords(server).find((r) => r.msg === "keelson-server ready");
    expect(ready?.database).toBe(`postgres keelson@127.0.0.1:${pg.port}${new URL(db.url).pathname}`);
    const projects = await api<{ projects: { id: string; name: string }[] }>(
      `${server.url}/v1/projects`,
      server.adminToken,
    );
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, server.adminToken, {
      method: "POST",
      body: { name: "on-postgres" },
    });
    expect(created.status).toBe(200);
    expect(await server.stop("SIGTERM")).toBe(0);

    server = await startServer({ env, dataDir: server.dataDir });
    procs.push(server);
    const read = await api<{ name: string }>(
      `${server.url}/v4/${projectId}/clusters/${created.body.uuid}`,
      server.adminToken,
    );
    expect(read).toMatchObject({ status: 200, body: { name: "on-postgres" } });
    expect(server.output()).not.toContain(db.password);
  });

  it("answers 503 with Retry-After while PostgreSQL restarts, says so on /readyz, and carries on by itself", async () => {
    const projectId = (
      await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, server.adminToken)
    ).body.projects[0]?.id as string;
    const seen: { status: number; retryAfter: string | null; code?: string }[] = [];
    const ready: number[] = [];
    let polling = true;
    const poll = (async () => {
      for (let i = 0; polling && i < 2_000; i++) {
        const res = await fetch(`${server.url}/v4/${projectId}/clusters`, {
          headers: { "x-auth-token": server.adminToken },
        });
        const body = (await res.json()) as { code?: string };
        seen.push({ status: res.status, retryAfter: res.headers.get("retry-after"), code: body.code });
        ready.push((await fetch(`${server.url}/readyz`)).status);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await pg.restart(2_000);
    // Back: every request succeeds again, with no restart of keelson-server. Within a few seconds
    // on a quiet machine; the bound is wide because the full suite's load once kept it past 15 s.
    // /readyz follows the database's state as its own probe sees it, a moment after requests do.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (seen.at(-1)?.status !== 200 || ready.at(-1) !== 200)) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    polling = false;
    await poll;

    const statuses = new Set(seen.map((s) => s.status));
    expect([...statuses].sort(), JSON.stringify(seen.filter((s) => s.status !== 200).slice(0, 3))).toEqual([200, 503]);
    for (const s of seen.filter((x) => x.status === 503)) {
      expect(s).toMatchObject({ code: "database_unavailable", retryAfter: "5" });
    }
    expect(ready).toContain(503);
    expect(ready.at(-1)).toBe(200);
    expect(seen.at(-1)?.status).toBe(200);
    expect(server.child.exitCode).toBeNull();
    expect(server.output()).not.toContain(db.password);
  });

  it("refuses a malformed URL with exit 78, naming the setting and the rule but not the URL", async () => {
    const { code, output } = await runToExit({ KEELSON_DATABASE_URL: "mysql://keelson:hunter2@db/keelson" });
    expect(code).toBe(78);
    expect(output).toContain("KEELSON_DATABASE_URL=(hidden): must start with postgres:// or postgresql://");
    expect(output).not.toContain("hunter2");
  });

  it("refuses a password file that is not there with exit 78", async () => {
    const { code, output } = await runToExit({
      KEELSON_DATABASE_URL: `postgres://keelson@127.0.0.1:${pg.port}/postgres`,
      KEELSON_DATABASE_PASSWORD_FILE: "/nonexistent/keelson-password",
    });
    expect(code).toBe(78);
    expect(output).toContain("KEELSON_DATABASE_PASSWORD_FILE: no file /nonexistent/keelson-password");
  });

  it("retries an unreachable database with backoff, then exits naming host, port and the answer", async () => {
    const port = await freePort();
    const started = Date.now();
    const { code, output } = await runToExit({
      KEELSON_DATABASE_URL: `postgres://keelson:not-this-one@127.0.0.1:${port}/keelson`,
      KEELSON_DATABASE_START_TIMEOUT_MS: "2000",
      KEELSON_DATABASE_CONNECT_TIMEOUT_MS: "1000",
    });
    expect(code).toBe(1);
    expect(Date.now() - started).toBeGreaterThan(1_500);
    const records = output
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    expect(records.filter((r) => r.msg === "database not ready; retrying").length).toBeGreaterThanOrEqual(2);
    const fatal = records.find((r) => r.level === 60);
    expect(fatal).toMatchObject({ database: `keelson@127.0.0.1:${port}/keelson`, code: "ECONNREFUSED" });
    expect(output).not.toContain("not-this-one");
  });

  it("exits naming the server's answer for a wrong password and for a database that does not exist", async () => {
    const wrong = await runToExit({
      KEELSON_DATABASE_URL: `postgres://keelson:wrong-password-x@127.0.0.1:${pg.port}/postgres`,
      KEELSON_DATABASE_START_TIMEOUT_MS: "0",
    });
    expect(wrong.code).toBe(1);
    expect(wrong.output).toContain('password authentication failed for user \\"keelson\\"');
    expect(wrong.output).not.toContain("wrong-password-x");

    const admin = new URL(pg.adminUrl);
    admin.pathname = "/no_such_database";
    const missing = await runToExit({ KEELSON_DATABASE_URL: admin.toString(), KEELSON_DATABASE_START_TIMEOUT_MS: "0" });
    expect(missing.code).toBe(1);
    expect(missing.output).toContain('database \\"no_such_database\\" does not exist');
    expect(missing.output).not.toContain(decodeURIComponent(admin.password));
  });
});
