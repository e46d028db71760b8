import { once } from "node:events";
import { accessSync, closeSync, constants, mkdirSync, openSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { execa, type ResultPromise } from "execa";
import type { Logger } from "pino";
import { readTextOrUndefined, writeFileAtomic } from "./atomic-file.ts";
import { childPath } from "./child-path.ts";
import { readEnvFile } from "./env-file.ts";
import { runProbe } from "./probe.ts";
import { isSameProcess, logTail, processStartTime, signalGroup, signalProcess } from "./process-info.ts";
import { ServiceError, type ServiceManager, type ServiceSpec, type ServiceStatus } from "./types.ts";

/**
 * Supervises services as detached child processes where there is no systemd (containers, CI,
 * tests). Each service leads its own process group, writes to `<host root>/var/log/keelson/
 * <name>.log`, and has `<host root>/run/keelson/<name>.pid` plus a record (spec, wanted state,
 * pid and the pid's kernel start time). The services outlive the agent like systemd units do;
 * a new supervisor adopts them from the records and keeps restarting the ones that should run.
 */

export interface DirectSupervisorOptions {
  hostRoot: string;
  log: Logger;
  /** Delay before the first restart after an exit, doubled per consecutive exit up to maxMs. */
  restartBackoff?: { initialMs: number; maxMs: number };
  /** A service that ran this long before exiting restarts without the accumulated delay. */
  stableAfterMs?: number;
  /** How often adopted services (not our children, so no exit event) are checked. */
  pollIntervalMs?: number;
  stopTimeoutMs?: number;
}

interface ServiceRecord {
  spec: ServiceSpec;
  desired: "running" | "stopped";
  pid: number | null;
  startTime: string | null;
  restarts: number;
  lastExit: string | null;
}

interface Entry extends ServiceRecord {
  /** Set when this supervisor spawned the current process (so an exit event will come). */
  ownChild: boolean;
  consecutiveExits: number;
  startedAt: number;
  restartTimer: NodeJS.Timeout | undefined;
}

export class DirectSupervisor implements ServiceManager {
  readonly kind = "direct" as const;
  readonly runDir: string;
  readonly logDir: string;
  private readonly entries = new Map<string, Entry>();
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly stableAfterMs: number;
  private readonly stopTimeoutMs: number;
  private readonly poller: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: DirectSupervisorOptions) {
    this.runDir = join(options.hostRoot, "run", "keelson");
    this.logDir = join(options.hostRoot, "var", "log", "keelson");
    this.backoff = options.restartBackoff ?? { initialMs: 500, maxMs: 30_000 };
    this.stableAfterMs = options.stableAfterMs ?? 10_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
    this.adoptAll();
    this.poller = setInterval(() => this.checkAdopted(), options.pollIntervalMs ?? 2000);
    this.poller.unref();
  }

  async install(spec: ServiceSpec): Promise<boolean> {
    validateName(spec.name);
    const entry = this.entries.get(spec.name);
    if (entry) {
      const changed = JSON.stringify(entry.spec) !== JSON.stringify(spec);
      entry.spec = spec;
      this.persist(entry);
      return changed;
    }
    const created: Entry = {
      spec,
      desired: "stopped",
      pid: null,
      startTime: null,
      restarts: 0,
      lastExit: null,
      ownChild: false,
      consecutiveExits: 0,
      startedAt: 0,
      restartTimer: undefined,
    };
    this.entries.set(spec.name, created);
    this.persist(created);
    return true;
  }

  async start(name: string): Promise<void> {
    const entry = this.require(name);
    entry.desired = "running";
    entry.consecutiveExits = 0;
    this.persist(entry);
    if (isSameProcess(entry.pid, entry.startTime)) return;
    clearTimeout(entry.restartTimer);
    entry.restartTimer = undefined;
    await this.spawn(entry);
  }

  async restart(name: string): Promise<void> {
    await this.stop(name);
    await this.start(name);
  }

  async stop(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry) return;
    entry.desired = "stopped";
    clearTimeout(entry.restartTimer);
    entry.restartTimer = undefined;
    this.persist(entry);
    const { pid, startTime } = entry;
    if (pid && isSameProcess(pid, startTime)) {
      this.options.log.info({ service: name, pid }, "stopping service");
      // Without keepChildrenOnStop the whole process group goes, as systemd's default KillMode.
      const signal = entry.spec.keepChildrenOnStop ? signalProcess : signalGroup;
      signal(pid, "SIGTERM");
      const timeoutMs = entry.spec.stopTimeoutMs ?? this.stopTimeoutMs;
      if (!(await waitGone(pid, startTime, timeoutMs))) {
        this.options.log.warn({ service: name, pid, timeoutMs }, "service ignored SIGTERM; killing it");
        signal(pid, "SIGKILL");
        if (!(await waitGone(pid, startTime, 5000))) throw new ServiceError(`${name} (pid ${pid}) survived SIGKILL`);
      }
    }
    entry.pid = null;
    entry.startTime = null;
    rmSync(this.pidFile(name), { force: true });
    this.persist(entry);
  }

  async uninstall(name: string): Promise<void> {
    await this.stop(name);
    this.entries.delete(name);
    rmSync(this.recordFile(name), { force: true });
  }

  async status(name: string): Promise<ServiceStatus> {
    const entry = this.entries.get(name);
    if (!entry) return { name, state: "stopped", pid: null, detail: `${name} is not installed`, restarts: 0 };
    const alive = isSameProcess(entry.pid, entry.startTime);
    const base = { name, restarts: entry.restarts };
    if (!alive) {
      if (entry.desired === "stopped") return { ...base, state: "stopped", pid: null, detail: `${name} is stopped` };
      const tail = logTail(this.logFile(name));
      return {
        ...base,
        state: "failed",
        pid: null,
        detail: `${name} is not running${entry.lastExit ? ` (last exit: ${entry.lastExit})` : ""}, ${entry.restarts} restart(s)${tail ? `; log ${this.logFile(name)} ends with:\n${tail}` : ""}`,
      };
    }
    if (!entry.spec.health) return { ...base, state: "running", pid: entry.pid, detail: `pid ${entry.pid}` };
    const probe = await runProbe(entry.spec.health);
    if (probe.ok) return { ...base, state: "running", pid: entry.pid, detail: `pid ${entry.pid}; ${probe.detail}` };
    return {
      ...base,
      state: "unhealthy",
      pid: entry.pid,
      detail: `pid ${entry.pid} is up but unhealthy: ${probe.detail}`,
    };
  }

  async waitHealthy(name: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<ServiceStatus> {
    const deadline = Date.now() + options.timeoutMs;
    let delay = 50;
    for (;;) {
      const status = await this.status(name);
      if (status.state === "running") return status;
      if (status.state === "stopped") throw new ServiceError(`${name} is not started`);
      if (Date.now() >= deadline) {
        throw new ServiceError(`${name} did not become healthy within ${options.timeoutMs} ms: ${status.detail}`);
      }
      options.signal?.throwIfAborted();
      await sleep(Math.min(delay, Math.max(0, deadline - Date.now())), undefined, { signal: options.signal });
      delay = Math.min(delay * 2, 500);
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.poller);
    for (const entry of this.entries.values()) clearTimeout(entry.restartTimer);
  }

  /** Pids of every service with a live process (tests use it to check nothing is left). */
  livePids(): Record<string, number> {
    const pids: Record<string, number> = {};
    for (const [name, entry] of this.entries) {
      if (entry.pid && isSameProcess(entry.pid, entry.startTime)) pids[name] = entry.pid;
    }
    return pids;
  }

  private async spawn(entry: Entry): Promise<void> {
    const { spec } = entry;
    try {
      accessSync(spec.command, constants.X_OK);
    } catch {
      throw new ServiceError(`cannot start ${spec.name}: ${spec.command} is missing or not executable`);
    }
    const env = {
      ...(spec.env ?? { PATH: childPath() }),
      ...(spec.environmentFile ? readEnvFile(spec.environmentFile) : {}),
    };
    mkdirSync(this.logDir, { recursive: true });
    mkdirSync(this.runDir, { recursive: true });
    const logFd = openSync(this.logFile(spec.name), "a", 0o640);
    let child: ResultPromise;
    try {
      child = execa(spec.command, spec.args, {
        cwd: spec.cwd,
        env,
        extendEnv: false,
        detached: true,
        cleanup: false,
        reject: false,
        buffer: false,
        stdin: "ignore",
        // A raw fd (execa types only list 3-9): the child writes its log directly, with no pipe
        // through the agent, so it keeps logging after the agent exits.
        stdout: logFd as 3,
        stderr: logFd as 3,
      });
      await Promise.race([once(child, "spawn"), once(child, "error").then(([err]) => Promise.reject(err))]);
    } catch (err) {
      throw new ServiceError(`cannot start ${spec.name} (${spec.command}): ${(err as Error).message}`);
    } finally {
      closeSync(logFd);
    }
    const pid = child.pid!;
    entry.pid = pid;
    entry.startTime = processStartTime(pid) ?? null;
    entry.ownChild = true;
    entry.startedAt = Date.now();
    writeFileAtomic(this.pidFile(spec.name), `${pid}\n`);
    this.persist(entry);
    this.options.log.info({ service: spec.name, pid }, "service started");
    child.unref();
    void child.then((result) => {
      const how = result.signal ? `signal ${result.signal}` : `code ${result.exitCode}`;
      this.onExit(entry, pid, how);
    });
  }

  private onExit(entry: Entry, pid: number, how: string): void {
    if (entry.pid !== pid) return;
    entry.ownChild = false;
    entry.lastExit = `${how} at ${new Date().toISOString()}`;
    this.persist(entry);
    if (entry.desired !== "running" || this.closed) return;
    this.scheduleRestart(entry);
  }

  private scheduleRestart(entry: Entry): void {
    if (entry.restartTimer) return;
    if (Date.now() - entry.startedAt > this.stableAfterMs) entry.consecutiveExits = 0;
    const delay = Math.min(this.backoff.initialMs * 2 ** entry.consecutiveExits, this.backoff.maxMs);
    entry.consecutiveExits++;
    this.options.log.warn(
      { service: entry.spec.name, lastExit: entry.lastExit, delayMs: delay },
      "service exited; restarting",
    );
    entry.restartTimer = setTimeout(() => {
      entry.restartTimer = undefined;
      if (entry.desired !== "running" || this.closed || isSameProcess(entry.pid, entry.startTime)) return;
      entry.restarts++;
      this.spawn(entry).catch((err: Error) => {
        entry.lastExit = err.message;
        this.persist(entry);
        this.options.log.error({ service: entry.spec.name, err: err.message }, "service restart failed");
        this.scheduleRestart(entry);
      });
    }, delay);
    entry.restartTimer.unref();
  }

  /** Processes a previous supervisor started send us no exit event: look at them now and then. */
  private checkAdopted(): void {
    for (const entry of this.entries.values()) {
      if (entry.desired !== "running" || entry.restartTimer || entry.ownChild) continue;
      if (isSameProcess(entry.pid, entry.startTime)) continue;
      entry.lastExit ??= "exited while not supervised by this agent";
      this.scheduleRestart(entry);
    }
  }

  private adoptAll(): void {
    let files: string[];
    try {
      files = readdirSync(this.runDir).filter((f) => f.endsWith(".service.json"));
    } catch {
      return;
    }
    for (const file of files) {
      const text = readTextOrUndefined(join(this.runDir, file));
      if (!text) continue;
      try {
        const record = JSON.parse(text) as ServiceRecord;
        this.entries.set(record.spec.name, {
          ...record,
          ownChild: false,
          consecutiveExits: 0,
          startedAt: 0,
          restartTimer: undefined,
        });
      } catch {
        this.options.log.warn({ file }, "ignoring an unreadable service record");
      }
    }
  }

  private require(name: string): Entry {
    const entry = this.entries.get(name);
    if (!entry) throw new ServiceError(`service ${name} is not installed`);
    return entry;
  }

  private persist(entry: Entry): void {
    // A closed supervisor leaves the records as they were: the next one adopts from them (and
    // a late exit event must not recreate a host root that was just removed).
    if (this.closed) return;
    const record: ServiceRecord = {
      spec: entry.spec,
      desired: entry.desired,
      pid: entry.pid,
      startTime: entry.startTime,
      restarts: entry.restarts,
      lastExit: entry.lastExit,
    };
    writeFileAtomic(this.recordFile(entry.spec.name), `${JSON.stringify(record, null, 2)}\n`, 0o600);
  }

  pidFile(name: string): string {
    return join(this.runDir, `${name}.pid`);
  }

  logFile(name: string): string {
    return join(this.logDir, `${name}.log`);
  }

  private recordFile(name: string): string {
    return join(this.runDir, `${name}.service.json`);
  }
}

function validateName(name: string): void {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(name)) throw new ServiceError(`bad service name "${name}"`);
}

async function waitGone(pid: number, startTime: string | null, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isSameProcess(pid, startTime)) return true;
    await sleep(25);
  }
  return !isSameProcess(pid, startTime);
}

/**
 * Kills every service process named by pid files under `<host root>/run/keelson` (tests'
 * afterAll, and a last resort when cleaning a node): SIGKILL to each process group whose pid
 * still has the recorded start time.
 */
export function killAllFromPidFiles(hostRoot: string): number[] {
  const runDir = join(hostRoot, "run", "keelson");
  const killed: number[] = [];
  let files: string[];
  try {
    files = readdirSync(runDir).filter((f) => f.endsWith(".service.json"));
  } catch {
    return killed;
  }
  for (const file of files) {
    try {
      const record = JSON.parse(readTextOrUndefined(join(runDir, file)) ?? "{}") as Partial<ServiceRecord>;
      if (record.pid && isSameProcess(record.pid, record.startTime)) {
        signalGroup(record.pid, "SIGKILL");
        killed.push(record.pid);
      }
    } catch {
      // Unreadable record: nothing we can safely kill.
    }
  }
  return killed;
}
