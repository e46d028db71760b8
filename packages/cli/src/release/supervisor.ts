import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Layout, readEnvFile } from "./layout.ts";
import { readReleaseManifest } from "./manifest.ts";

/**
 * The process supervisor that stands in for systemd where it does not run (`keelson install
 * control-plane --root DIR`, tests, CI). It keeps the unit's promises (keelson-server.service):
 *
 * - ExecStart: `node <current>/<manifest's server entry>`, re-resolved at every start, so a
 *   switched `current` runs the new release from the next start on;
 * - EnvironmentFile: the server's environment is server.env (plus PATH), nothing of the caller's;
 * - Restart=on-failure, RestartSec, RestartPreventExitStatus=78 (a bad setting cannot heal);
 * - KillMode=mixed, TimeoutStopSec: SIGTERM to the server, SIGKILL after the grace.
 *
 * Its state, <run dir>/supervisor.json, is what `keelson stop` and the upgrade's health gate
 * read: the supervisor's pid, the server's pid and release, how often it was started, and the
 * last exit code. The server's output goes to <log dir>/server.log.
 */
export interface SupervisorState {
  supervisorPid: number;
  serverPid: number | null;
  version: string | null;
  /** How many times the server was started since the supervisor started. */
  starts: number;
  lastExit: { code: number | null; signal: string | null; at: string } | null;
  /** Set when the supervisor gave up (exit 78, or too many failures). */
  gaveUp: string | null;
}

export const SUPERVISOR_STATE = "supervisor.json";
export const SERVER_LOG = "server.log";
const RESTART_SEC = 1_000;
const STOP_TIMEOUT_MS = 45_000;
/** systemd's default StartLimitBurst in its StartLimitIntervalSec (5 in 10 s). */
const START_LIMIT = { burst: 5, intervalMs: 10_000 };
const SETTINGS_EXIT_CODE = 78;

function writeState(layout: Layout, state: SupervisorState): void {
  const file = join(layout.runDir, SUPERVISOR_STATE);
  writeFileSync(`${file}.tmp`, `${JSON.stringify(state)}\n`);
  renameSync(`${file}.tmp`, file);
}

/** `path`: the PATH keelson-server gets (systemd gives a unit its own; pg_dump and psql are found on it). */
export async function runServerSupervisor(layout: Layout, path: string): Promise<number> {
  mkdirSync(layout.runDir, { recursive: true });
  mkdirSync(layout.logDir, { recursive: true });
  const logFile = join(layout.logDir, SERVER_LOG);
  const state: SupervisorState = {
    supervisorPid: process.pid,
    serverPid: null,
    version: null,
    starts: 0,
    lastExit: null,
    gaveUp: null,
  };
  let child: ChildProcess | undefined;
  let stopping = false;
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      setTimeout(() => child?.kill("SIGKILL"), STOP_TIMEOUT_MS).unref();
    }
  };
  process.on("SIGTERM", onSignal);
  // The unit's UMask=0077: the database and what the server writes are the owner's only.
  process.umask(0o077);
  process.on("SIGINT", onSignal);
  const starts: number[] = [];
  try {
    while (!stopping) {
      const now = Date.now();
      starts.push(now);
      while (starts.length > 0 && (starts[0] as number) < now - START_LIMIT.intervalMs) starts.shift();
      if (starts.length > START_LIMIT.burst) {
        state.gaveUp = `started ${START_LIMIT.burst} times in ${START_LIMIT.intervalMs / 1000} s and failed each time (start limit hit)`;
        break;
      }
      const manifest = readReleaseManifest(layout.current);
      const env = { ...readEnvFile(layout.serverEnv), PATH: path };
      const out = openSync(logFile, "a");
      appendFileSync(logFile, `-- keelson-supervise: starting keelson-server ${manifest.version}\n`);
      child = spawn(process.execPath, [join(layout.current, manifest.entries.server)], {
        env,
        cwd: layout.dataDir,
        stdio: ["ignore", out, out],
      });
      state.starts += 1;
      state.serverPid = child.pid ?? null;
      state.version = manifest.version;
      writeState(layout, state);
      const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child?.once("exit", (code, signal) => resolve({ code, signal })),
      );
      state.serverPid = null;
      state.lastExit = { ...exit, at: new Date().toISOString() };
      appendFileSync(
        logFile,
        `-- keelson-supervise: keelson-server exited (code ${exit.code}, signal ${exit.signal})\n`,
      );
      writeState(layout, state);
      if (stopping || exit.code === 0) break;
      if (exit.code === SETTINGS_EXIT_CODE) {
        state.gaveUp = "keelson-server exited 78: a bad setting (see server.log); not restarted";
        break;
      }
      await new Promise((r) => setTimeout(r, RESTART_SEC));
    }
  } finally {
    writeState(layout, state);
    if (!state.gaveUp) rmSync(join(layout.runDir, SUPERVISOR_STATE), { force: true });
  }
  return state.gaveUp ? 1 : 0;
}
