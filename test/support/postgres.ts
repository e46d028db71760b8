/**
 * A real PostgreSQL server for the tests and benches (Debian's `postgresql` package, installed by
 * scripts/ensure-system-deps.sh): listening on loopback only, with password authentication (the
 * store must be tested the way production connects, so no `trust`), in a temporary directory that
 * is removed when it stops, also when the run fails or is interrupted.
 *
 * No vitest import here: the benches run this module outside vitest. Test files get databases
 * through postgres-database.ts, on the one server that postgres-global-setup.ts starts per run.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

export interface PostgresServer {
  host: "127.0.0.1";
  port: number;
  /** The `postgres` maintenance database, as the `keelson` superuser. */
  adminUrl: string;
  /** A new database cloned from the template (by default named after a random id); its URL. */
  createDatabase(name?: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /** Fast shutdown (sessions end with 57P01), down for `downMs`, then up again on the same port and data. */
  restart(downMs?: number): Promise<void>;
  /** Fast shutdown, then the temporary directory is removed. */
  stop(): Promise<void>;
  /** The postmaster's process id (postmaster.pid's first line): benches count its processes' CPU. */
  postmasterPid(): number;
}

const USER = "keelson";
/**
 * Every test database is cloned from this one rather than from template1: nobody may connect to
 * it, so a clone never fails with "source database is being accessed by other users", and what
 * every test database should start with can be prepared in it once.
 */
const TEMPLATE = "keelson_template";
/**
 * The same, with the store's migrations applied (made by postgres-global-setup.ts): a control
 * plane's test database starts from it, so each test does not pay for the migrations. The
 * store's own tests clone the empty TEMPLATE, to see the migrations run.
 */
export const MIGRATED_TEMPLATE = "keelson_migrated";
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
/** The store tests open several pools on many databases at once, from parallel test files. */
const MAX_CONNECTIONS = 300;
/** Ctrl-C, `kill`, a closed terminal: each ends the run without stop(). */
const SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/** The newest installed PostgreSQL's programs. */
export function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no PostgreSQL under ${root}: run scripts/ensure-system-deps.sh`);
  return join(root, newest, "bin");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** `initdb` and `postgres` refuse to run as root: as root (CI), they run as the `postgres` user. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/** Sleeps without the event loop, for the process 'exit' listener, where nothing asynchronous runs. */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function randomName(): string {
  return `t_${randomBytes(6).toString("hex")}`;
}

/** One admin statement on its own connection, closed afterwards. */
async function admin(adminUrl: string, run: (sql: postgres.Sql) => Promise<unknown>): Promise<void> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await run(sql);
  } finally {
    await sql.end();
  }
}

/** A new database on the server at `adminUrl`, cloned from a template (the empty one by default); its URL. */
export async function createDatabaseAt(adminUrl: string, name = randomName(), template = TEMPLATE): Promise<string> {
  await admin(adminUrl, (sql) => sql`create database ${sql(name)} template ${sql(template)}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Makes `name` (a database cloned from the empty template) a template itself, after `prepare`
 * filled it: nobody may connect to it afterwards.
 */
export async function freezeAsTemplate(adminUrl: string, name: string): Promise<void> {
  await admin(adminUrl, (sql) => sql`alter database ${sql(name)} is_template true allow_connections false`);
}

/** Drops a database, ending the sessions a test may have left open on it. */
export async function dropDatabaseAt(adminUrl: string, name: string): Promise<void> {
  await admin(adminUrl, (sql) => sql`drop database ${sql(name)} with (force)`);
}

export interface PostgresTls {
  /** PEM files, copied into the server's directory (the key must belong to the server's user, mode 0600). */
  certFile: string;
  keyFile: string;
  /** The CA client certificates are checked against. */
  caFile: string;
  /** Roles that log in with a client certificate only (`hostssl … cert`: the certificate's CN is the role). */
  certUsers: string[];
}

/**
 * `tls`: the server also takes TLS, and `certUsers` authenticate by client certificate.
 * `settings`: more server settings (`-c name=value`), for a benchmark's instruments.
 */
export async function startPostgres(
  options: { tls?: PostgresTls; settings?: Record<string, string> } = {},
): Promise<PostgresServer> {
  const bin = postgresBin();
  const owner = serverUser();
  const dir = mkdtempSync(join(tmpdir(), "keelson-pg-"));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, "data");
  let child: ChildProcess | undefined;
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  // The last resort when the run ends without stop(): a failed or interrupted run. Only synchronous
  // work is possible in an 'exit' listener.
  function stopNow(): void {
    unregister();
    if (running()) {
      // Immediate shutdown: the postmaster ends its backends, frees its shared memory and, last,
      // removes postmaster.pid, which is how pg_ctl too sees that a server has stopped.
      child?.kill("SIGQUIT");
      const deadline = Date.now() + STOP_TIMEOUT_MS;
      while (existsSync(join(data, "postmaster.pid")) && Date.now() < deadline) sleepSync(20);
      child?.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  }
  function onSignal(signal: NodeJS.Signals): void {
    stopNow();
    // No other listener will end the process: end it as the signal would have.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  }
  function unregister(): void {
    process.removeListener("exit", stopNow);
    for (const signal of SIGNALS) process.removeListener(signal, onSignal);
  }
  // First in line: vitest's own 'exit' and signal listeners call process.exit(), which ends the
  // process before any listener after them runs.
  process.prependOnceListener("exit", stopNow);
  for (const signal of SIGNALS) process.prependOnceListener(signal, onSignal);

  try {
    const password = randomBytes(18).toString("base64url");
    const pwfile = join(dir, "pwfile");
    writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (owner) chownSync(pwfile, owner.uid, owner.gid);
    // TCP connections need the password; the Unix socket (in `dir`) lets nobody in.
    execFileSync(
      join(bin, "initdb"),
      [
        `--pgdata=${data}`,
        `--username=${USER}`,
        `--pwfile=${pwfile}`,
        "--auth-host=scram-sha-256",
        "--auth-local=reject",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
        "--no-instructions",
      ],
      { ...owner, cwd: dir },
    );
    rmSync(pwfile);
    const tlsArgs: string[] = [];
    if (options.tls) {
      const tls = options.tls;
      for (const [from, name] of [
        [tls.certFile, "server.crt"],
        [tls.keyFile, "server.key"],
        [tls.caFile, "ca.crt"],
      ] as const) {
        const to = join(dir, name);
        writeFileSync(to, readFileSync(from), { mode: 0o600 });
        if (owner) chownSync(to, owner.uid, owner.gid);
      }
      tlsArgs.push(
        "-c",
        "ssl=on",
        "-c",
        `ssl_cert_file=${join(dir, "server.crt")}`,
        "-c",
        `ssl_key_file=${join(dir, "server.key")}`,
        "-c",
        `ssl_ca_file=${join(dir, "ca.crt")}`,
      );
      // First match wins: certificate users over TLS only, everyone else by password as before.
      const hba = join(data, "pg_hba.conf");
      const lines = [
        ...tls.certUsers.map((user) => `hostssl all ${user} 127.0.0.1/32 cert`),
        ...tls.certUsers.map((user) => `host all ${user} 127.0.0.1/32 reject`),
        "host all all 127.0.0.1/32 scram-sha-256",
      ];
      writeFileSync(hba, `${lines.join("\n")}\n`);
      if (owner) chownSync(hba, owner.uid, owner.gid);
    }

    const port = await freePort();
    let log = "";
    // Started again by restart() on the same data and port.
    const launch = (): ChildProcess => {
      const server = spawn(
        join(bin, "postgres"),
        [
          "-D",
          data,
          "-p",
          String(port),
          "-k",
          dir,
          "-c",
          "listen_addresses=127.0.0.1",
          // Test-only speed: no fsync, no synchronous commit, no full-page writes. A crash loses the
          // server's data, which the tests throw away anyway. Never settings for a real server.
          "-c",
          "fsync=off",
          "-c",
          "synchronous_commit=off",
          "-c",
          "full_page_writes=off",
          "-c",
          `max_connections=${MAX_CONNECTIONS}`,
          ...tlsArgs,
          ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ["-c", `${name}=${value}`]),
        ],
        { ...owner, cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
      );
      server.stderr?.on("data", (chunk: Buffer) => {
        log = (log + chunk.toString()).slice(-8192);
      });
      return server;
    };
    const adminUrl = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
    const ready = async () => {
      const deadline = Date.now() + START_TIMEOUT_MS;
      for (;;) {
        if (!running()) throw new Error(`postgres exited with ${child?.exitCode ?? child?.signalCode}: ${log}`);
        try {
          await admin(adminUrl, (sql) => sql`select 1`);
          return;
        } catch (err) {
          // Until it is up, the server refuses connections, then answers 57P03 ("starting up").
          const code = (err as { code?: string }).code;
          if (code !== "ECONNREFUSED" && code !== "57P03") throw err;
          if (Date.now() > deadline) {
            throw new Error(`postgres did not accept connections in ${START_TIMEOUT_MS} ms\n${log}`);
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    };
    // Fast shutdown: the server ends its sessions (they see 57P01), then a checkpoint.
    const shutdown = async () => {
      const server = child;
      if (!server || !running()) return;
      const exited = once(server, "exit");
      server.kill("SIGINT");
      const timer = setTimeout(() => server.kill("SIGKILL"), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    };
    child = launch();
    await ready();
    await admin(adminUrl, (sql) => sql`create database ${sql(TEMPLATE)} is_template true allow_connections false`);

    return {
      host: "127.0.0.1",
      port,
      adminUrl,
      createDatabase: (name) => createDatabaseAt(adminUrl, name),
      dropDatabase: (name) => dropDatabaseAt(adminUrl, name),
      async restart(downMs = 0) {
        await shutdown();
        await new Promise((resolve) => setTimeout(resolve, downMs));
        child = launch();
        await ready();
      },
      async stop() {
        unregister();
        await shutdown();
        rmSync(dir, { recursive: true, force: true });
      },
      postmasterPid: () => Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]),
    };
  } catch (err) {
    stopNow();
    throw err;
  }
}
