import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CliError } from "../errors.ts";
import type { Layout } from "./layout.ts";
import { SERVER_LOG, SUPERVISOR_STATE, type SupervisorState } from "./supervisor.ts";

/**
 * How keelson-server is started and stopped: systemd where it runs and the root is `/`, else the
 * process supervisor (supervisor.ts) started detached. Both answer the same questions, which is
 * all the upgrade's health gate needs: is it running, how often has it been started, how did it
 * last exit, and the end of its log.
 */
export interface Health {
  running: boolean;
  starts: number;
  lastExit: string | null;
  gaveUp: string | null;
}

export interface ServiceManager {
  readonly kind: "systemd" | "supervisor";
  start(): Promise<void>;
  /** Idempotent; also ends a server whose supervisor is gone (a half-failed upgrade). */
  stop(): Promise<void>;
  health(): Health;
  logTail(lines: number): string;
}

/**
 * What a failed start said, out of its log: the error lines of the last run that ended (an
 * uncaught error's first line, a pino fatal record's message), not the stack around them.
 */
export function failureOf(log: string): string {
  const runs = log.split(/^-- keelson-supervise: starting .*$/m);
  const ended =
    [...runs].reverse().find((r) => /-- keelson-supervise: keelson-server exited/.test(r)) ?? runs.at(-1) ?? "";
  const lines = ended.split("\n").flatMap((line) => {
    if (line.startsWith("{")) {
      try {
        const record = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
        // The record's error too: "shutting down after an error" alone does not say which.
        return (record.level ?? 0) >= 50 && record.msg
          ? [record.err?.message ? `${record.msg}: ${record.err.message}` : record.msg]
          : [];
      } catch {
        return [];
      }
    }
    // An error's first line, also its cause's (PostgreSQL's own answer under a driver's error).
    return /^\s*(\[cause\]: |cause: )?(\w*Error|Error)\b.*:/.test(line) || /^\s*(code|message): /.test(line)
      ? [line.trim()]
      : [];
  });
  return [...new Set(lines)].slice(0, 4).join("; ") || "(nothing in its log says why)";
}

const SUPERVISE_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bin", "keelson-supervise.mjs");

export function serviceManager(layout: Layout, path: string): ServiceManager {
  return layout.root === "/" && existsSync("/run/systemd/system")
    ? new SystemdService()
    : new SupervisedService(layout, path);
}

function alive(pid: number | null | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class SupervisedService implements ServiceManager {
  readonly kind = "supervisor";
  constructor(
    private readonly layout: Layout,
    private readonly path: string,
  ) {}

  private state(): SupervisorState | undefined {
    try {
      return JSON.parse(readFileSync(join(this.layout.runDir, SUPERVISOR_STATE), "utf8")) as SupervisorState;
    } catch {
      return undefined;
    }
  }

  health(): Health {
    const s = this.state();
    const running = alive(s?.supervisorPid) && !s?.gaveUp;
    const exit = s?.lastExit;
    return {
      running,
      starts: s?.starts ?? 0,
      lastExit: exit ? (exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`) : null,
      gaveUp: s?.gaveUp ?? null,
    };
  }

  async start(): Promise<void> {
    if (this.health().running) return;
    rmSync(join(this.layout.runDir, SUPERVISOR_STATE), { force: true });
    mkdirSync(this.layout.logDir, { recursive: true });
    const out = openSync(join(this.layout.logDir, "supervisor.log"), "a");
    const child = spawn(process.execPath, [SUPERVISE_BIN, "--root", this.layout.root], {
      detached: true,
      stdio: ["ignore", out, out],
      env: { PATH: this.path },
    });
    child.unref();
    for (let i = 0; i < 200; i++) {
      const s = this.state();
      if (s && (s.serverPid || s.gaveUp)) return;
      if (child.exitCode !== null) break;
      await sleep(50);
    }
    if (!this.state()) throw new CliError(`the process supervisor did not start: ${this.logTail(10)}`);
  }

  async stop(): Promise<void> {
    const s = this.state();
    if (alive(s?.supervisorPid)) process.kill(s?.supervisorPid as number, "SIGTERM");
    for (let i = 0; i < 1_000 && alive(s?.supervisorPid); i++) await sleep(50);
    for (const pid of [s?.supervisorPid, s?.serverPid]) if (alive(pid)) process.kill(pid as number, "SIGKILL");
    rmSync(join(this.layout.runDir, SUPERVISOR_STATE), { force: true });
  }

  logTail(lines: number): string {
    try {
      return readFileSync(join(this.layout.logDir, SERVER_LOG), "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no server.log)";
    }
  }
}

/** systemd's keelson-server.service, through systemctl and journalctl. */
export class SystemdService implements ServiceManager {
  readonly kind = "systemd";
  private systemctl(...args: string[]): string {
    try {
      return execFileSync("systemctl", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new CliError(`systemctl ${args.join(" ")}: ${(e.stderr ?? e.message).trim()}`);
    }
  }
  async start(): Promise<void> {
    this.systemctl("daemon-reload");
    this.systemctl("enable", "--now", "keelson-server.service");
  }
  async stop(): Promise<void> {
    this.systemctl("stop", "keelson-server.service");
  }
  health(): Health {
    const props = Object.fromEntries(
      this.systemctl("show", "keelson-server.service", "-p", "ActiveState,NRestarts,ExecMainStatus,Result")
        .trim()
        .split("\n")
        .map((l) => l.split("=", 2) as [string, string]),
    );
    return {
      running: props.ActiveState === "active",
      starts: Number(props.NRestarts ?? 0) + 1,
      lastExit: props.ExecMainStatus ? `code ${props.ExecMainStatus}` : null,
      gaveUp: props.ActiveState === "failed" ? `systemd: ${props.Result}` : null,
    };
  }
  logTail(lines: number): string {
    try {
      return execFileSync("journalctl", ["-u", "keelson-server.service", "-n", String(lines), "--no-pager"], {
        encoding: "utf8",
      });
    } catch {
      return "(journalctl failed)";
    }
  }
}
