/**
 * A real PostgreSQL server for the tests (Debian's `postgresql` package): one per test run,
 * listening on loopback only, with password authentication, in a temporary directory that is
 * removed when it stops, also when the run fails. `initdb` refuses to run as root, so the
 * server runs as the `postgres` user.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

export interface PostgresServer {
  host: "127.0.0.1";
  port: number;
  user: string;
  password: string;
  /** The `postgres` maintenance database, as the superuser. */
  adminUrl: string;
  stop(): Promise<void>;
}

const USER = "keelson";
const START_TIMEOUT_MS = 30_000;

/** The newest installed PostgreSQL's programs. */
export function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no PostgreSQL under ${root}: install Debian's postgresql package`);
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

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBin();
  const owner = postgresUser();
  const dir = mkdtempSync(join(tmpdir(), "keelson-pg-"));
  chownSync(dir, owner.uid, owner.gid);
  const password = randomBytes(18).toString("base64url");
  const pwfile = join(dir, "pwfile");
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  chownSync(pwfile, owner.uid, owner.gid);
  const data = join(dir, "data");
  execFileSync(
    join(bin, "initdb"),
    [
      "-D",
      data,
      "-U",
      USER,
      `--pwfile=${pwfile}`,
      "--auth-host=scram-sha-256",
      "--auth-local=reject",
      "-E",
      "UTF8",
      "--locale=C",
    ],
    { ...owner, stdio: "ignore", cwd: dir },
  );
  const port = await freePort();
  // Test-only speed: no fsync, no synchronous commit, no full-page writes. A crash loses the
  // server's data, which the tests throw away anyway.
  const child: ChildProcess = spawn(
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
      "-c",
      "fsync=off",
      "-c",
      "synchronous_commit=off",
      "-c",
      "full_page_writes=off",
      "-c",
      "max_connections=300",
    ],
    { ...owner, cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-8192);
  });
  const cleanUp = () => {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  // Whatever ends the run, no server or directory stays behind.
  process.once("exit", cleanUp);

  const adminUrl = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) {
      cleanUp();
      throw new Error(`postgres exited with ${child.exitCode}: ${log}`);
    }
    const sql = postgres(adminUrl, { max: 1, connect_timeout: 2, onnotice: () => {} });
    try {
      await sql`select 1`;
      await sql.end();
      break;
    } catch (err) {
      await sql.end({ timeout: 0 });
      if (Date.now() > deadline) {
        cleanUp();
        throw new Error(`postgres did not accept connections in ${START_TIMEOUT_MS} ms: ${String(err)}\n${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  return {
    host: "127.0.0.1",
    port,
    user: USER,
    password,
    adminUrl,
    async stop() {
      process.removeListener("exit", cleanUp);
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGINT"); // fast shutdown
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A new, empty database on the server; its URL. */
export async function createDatabase(adminUrl: string, name = `t_${randomBytes(6).toString("hex")}`): Promise<string> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`create database "${name}"`);
  } finally {
    await sql.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
