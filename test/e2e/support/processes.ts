import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ControlPlaneTrust } from "../../../packages/agent/src/link/trust.ts";
import { openStore, parseDatabaseUrl, type Store } from "../../../packages/db/src/store/index.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..", "..");

/** A free TCP port on the given loopback address (the kernel picks; we release it right away). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, host, () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => done(port));
    });
  });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Proc {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | string>;
}

/**
 * Starts a command from the repository root (or `cwd`: another revision's worktree, whose
 * binaries `npx` then finds), capturing its output for failure messages.
 */
export function start(command: string, args: string[], env: Record<string, string>, cwd = REPO_ROOT): Proc {
  // Own process group: `npx` runs the binary under npm and a shell, and signals sent to npx
  // alone do not reach it (the server was left running). stop() signals the whole group.
  const child = spawn(command, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | string>((done) => {
    child.once("exit", (code, signal) => done(code ?? signal ?? "unknown"));
  });
  return {
    child,
    output: () => out,
    exited,
    async stop(signal = "SIGTERM", timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      // SIGKILL takes the whole group, like a crash. Any other signal goes to the program npx
      // runs (as systemd would signal it), so its exit code comes back through npm and the shell.
      if (signal === "SIGKILL") signalGroup(child, signal);
      else process.kill(mainProcess(child), signal);
      const timer = setTimeout(() => signalGroup(child, "SIGKILL"), timeoutMs);
      const result = await exited;
      // npx can exit before the process it started: wait until none of the group is left.
      const deadline = Date.now() + timeoutMs;
      while (groupAlive(child) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      clearTimeout(timer);
      return result;
    },
  };
}

interface ProcInfo {
  pid: number;
  ppid: number;
  pgrp: number;
  cmdline: string;
}

function processesOfGroup(pgrp: number): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const info = {
        pid: Number(name),
        ppid: Number(fields[1]),
        pgrp: Number(fields[2]),
        cmdline: readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " "),
      };
      if (info.pgrp === pgrp) out.push(info);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** The program under npx's wrappers (npm, then a shell); the child itself when there are none. */
function mainProcess(child: ChildProcess): number {
  const group = processesOfGroup(child.pid as number);
  let current = group.find((p) => p.pid === child.pid);
  while (current && (/\bnpm\b|npm-cli|\bnpx\b/.test(current.cmdline) || /^(\/bin\/)?sh -c /.test(current.cmdline))) {
    const parent: ProcInfo = current;
    const next = group.find((p) => p.ppid === parent.pid);
    if (!next) break;
    current = next;
  }
  return current?.pid ?? (child.pid as number);
}

/** The command line of the program a Proc runs (under npx's wrappers): which checkout's binary it is. */
export function programCommandLine(proc: Proc): string {
  const pid = mainProcess(proc.child);
  return (
    processesOfGroup(proc.child.pid as number)
      .find((p) => p.pid === pid)
      ?.cmdline.trim() ?? ""
  );
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // the group is already gone
  }
}

function groupAlive(child: ChildProcess): boolean {
  try {
    process.kill(-(child.pid as number), 0);
    return true;
  } catch {
    return false;
  }
}

export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
}

export interface ServerProc extends Proc {
  url: string;
  dataDir: string;
  adminToken: string;
}

/**
 * Where servers keep their data besides the data dir: nothing (SQLite in the data dir), or a
 * PostgreSQL database per data dir when the e2e-postgres project's setup file says so.
 */
let databaseOf: ((dataDir: string) => Promise<string>) | undefined;

/** For the e2e-postgres project (test/support/e2e-postgres-setup.ts): every server started on PostgreSQL. */
export function runServersOnPostgres(databaseFor: (dataDir: string) => Promise<string>): void {
  databaseOf = databaseFor;
}

/** The store servers of this run use, for tests whose checks differ by store. */
export function serverDialect(): "sqlite" | "postgres" {
  return databaseOf ? "postgres" : "sqlite";
}

/** The store settings a server or a keelson-server command on `dataDir` runs with in this run. */
export async function storeEnv(dataDir: string): Promise<Record<string, string>> {
  return {
    KEELSON_DATA_DIR: dataDir,
    ...(databaseOf ? { KEELSON_DATABASE_URL: await databaseOf(dataDir), ...secretsKeyEnv() } : {}),
  };
}

/** The store a stopped server on `dataDir` used, opened directly (to read or doctor its rows). */
export async function openServerStore(dataDir: string): Promise<Store> {
  const url = (await storeEnv(dataDir)).KEELSON_DATABASE_URL;
  return openStore(
    url
      ? {
          dialect: "postgres",
          target: parseDatabaseUrl(url),
          poolSize: 1,
          statementTimeoutMs: 10_000,
          connectTimeoutMs: 5_000,
          startTimeoutMs: 0,
          applicationName: "keelson-e2e",
          binaryVersion: "0.1.0",
        }
      : { dialect: "sqlite", file: join(dataDir, "keelson.sqlite"), binaryVersion: "0.1.0" },
  );
}

/** `npx keelson-server` from the repository root, as the README starts it. */
export async function startServer(
  options: {
    dataDir?: string;
    port?: number;
    adminToken?: string;
    env?: Record<string, string>;
    /** A command the server runs under, e.g. `["prlimit", "--nofile=256:256"]`. */
    wrap?: string[];
    /** The server speaks HTTPS (KEELSON_TLS=auto): the readiness probe trusts the CA of its data dir. */
    https?: boolean;
    /** The checkout whose keelson-server runs (default this one), e.g. a previous release's worktree. */
    root?: string;
  } = {},
): Promise<ServerProc> {
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? tempDir("keelson-e2e-server-");
  const adminToken = options.adminToken ?? "e2e-admin-token";
  const [command = "npx", ...args] = [...(options.wrap ?? []), "npx", "--no-install", "keelson-server"];
  const proc = start(
    command,
    args,
    {
      KEELSON_LISTEN: `127.0.0.1:${port}`,
      KEELSON_ADMIN_TOKEN: adminToken,
      KEELSON_LOG_LEVEL: "warn",
      ...(await storeEnv(dataDir)),
      ...options.env,
    },
    options.root,
  );
  const url = `${options.https ? "https" : "http"}://127.0.0.1:${port}`;
  await waitUntil(
    `keelson-server on ${url}\n${proc.output()}`,
    async () => {
      if (proc.child.exitCode !== null) throw new Error(`server exited: ${proc.output()}`);
      const doFetch = options.https ? trustedFetch(dataDir) : fetch;
      return (await doFetch(`${url}/readyz`)).ok;
    },
    30_000,
  );
  return { ...proc, url, dataDir, adminToken };
}

/** A fetch that trusts only the CA keelson-server made in `dataDir` (KEELSON_TLS=auto). */
export function trustedFetch(dataDir: string): typeof fetch {
  return new ControlPlaneTrust(readFileSync(join(dataDir, "tls", "ca.crt"), "utf8")).fetch;
}

export async function api<T = unknown>(
  url: string,
  token: string,
  init: { method?: string; body?: unknown; fetch?: typeof fetch } = {},
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await (init.fetch ?? fetch)(url, {
    method: init.method ?? "GET",
    headers: {
      "x-auth-token": token,
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON (kubeconfig blobs and the like)
  }
  return { status: res.status, body: body as T, headers: res.headers };
}

/** A process's JSON log records (pino lines), for checks on fields rather than on wording. */
export function logRecords(proc: Proc): Record<string, unknown>[] {
  return proc
    .output()
    .split("\n")
    .flatMap((line) => {
      if (!line.startsWith("{")) return [];
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

/** pino's level numbers. */
export const LOG_LEVEL = { error: 50, fatal: 60 } as const;
