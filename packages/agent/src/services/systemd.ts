import { rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { execa } from "execa";
import type { Logger } from "pino";
import { readTextOrUndefined, writeFileIfChanged } from "./atomic-file.ts";
import { runProbe } from "./probe.ts";
import { ServiceError, type ServiceManager, type ServiceSpec, type ServiceStatus } from "./types.ts";

/**
 * Services as systemd units (`keelson-<name>.service` under `<host root>/etc/systemd/system`):
 * systemd restarts them, journald keeps their logs. The health probe stays ours, since systemd
 * only knows whether the main process lives.
 */

export type Systemctl = (args: string[]) => Promise<{ exitCode: number; stdout: string; stderr: string }>;

export const realSystemctl: Systemctl = async (args) => {
  const result = await execa("systemctl", args, { reject: false, timeout: 60_000, stdin: "ignore" });
  return { exitCode: result.exitCode ?? 1, stdout: String(result.stdout), stderr: String(result.stderr) };
};

export interface SystemdManagerOptions {
  hostRoot: string;
  log: Logger;
  systemctl?: Systemctl;
}

export class SystemdManager implements ServiceManager {
  readonly kind = "systemd" as const;
  readonly unitDir: string;
  private readonly systemctl: Systemctl;
  private readonly specs = new Map<string, ServiceSpec>();

  constructor(private readonly options: SystemdManagerOptions) {
    this.unitDir = join(options.hostRoot, "etc", "systemd", "system");
    this.systemctl = options.systemctl ?? realSystemctl;
  }

  async install(spec: ServiceSpec): Promise<boolean> {
    this.specs.set(spec.name, spec);
    const changed = writeFileIfChanged(this.unitFile(spec.name), renderUnit(spec));
    if (changed) {
      this.options.log.info({ unit: this.unitFile(spec.name) }, "systemd unit written");
      await this.run(["daemon-reload"]);
    }
    return changed;
  }

  async start(name: string): Promise<void> {
    await this.run(["enable", "--now", unitName(name)]);
  }

  async restart(name: string): Promise<void> {
    await this.run(["restart", unitName(name)]);
  }

  async stop(name: string): Promise<void> {
    if (readTextOrUndefined(this.unitFile(name)) === undefined) return;
    await this.run(["disable", "--now", unitName(name)]);
  }

  async uninstall(name: string): Promise<void> {
    await this.stop(name);
    rmSync(this.unitFile(name), { force: true });
    this.specs.delete(name);
    await this.run(["daemon-reload"]);
  }

  async status(name: string): Promise<ServiceStatus> {
    const base = { name, restarts: 0 };
    if (readTextOrUndefined(this.unitFile(name)) === undefined) {
      return { ...base, state: "stopped", pid: null, detail: `${unitName(name)} is not installed` };
    }
    const show = await this.systemctl(["show", unitName(name), "--property=ActiveState,SubState,MainPID,NRestarts"]);
    const props = Object.fromEntries(
      show.stdout
        .split("\n")
        .filter((l) => l.includes("="))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    const pid = Number(props.MainPID) || null;
    const restarts = Number(props.NRestarts) || 0;
    const active = props.ActiveState === "active" && props.SubState === "running";
    if (!active) {
      const state = props.ActiveState === "inactive" ? "stopped" : "failed";
      return {
        name,
        state,
        pid: null,
        restarts,
        detail: `${unitName(name)} is ${props.ActiveState}/${props.SubState} (see journalctl -u ${unitName(name)})`,
      };
    }
    const spec = this.specs.get(name);
    if (!spec?.health) return { name, state: "running", pid, restarts, detail: `pid ${pid}` };
    const probe = await runProbe(spec.health);
    return probe.ok
      ? { name, state: "running", pid, restarts, detail: `pid ${pid}; ${probe.detail}` }
      : { name, state: "unhealthy", pid, restarts, detail: `pid ${pid} is up but unhealthy: ${probe.detail}` };
  }

  async waitHealthy(name: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<ServiceStatus> {
    const deadline = Date.now() + options.timeoutMs;
    for (;;) {
      const status = await this.status(name);
      if (status.state === "running") return status;
      if (Date.now() >= deadline) {
        throw new ServiceError(`${name} did not become healthy within ${options.timeoutMs} ms: ${status.detail}`);
      }
      await sleep(250, undefined, { signal: options.signal });
    }
  }

  close(): void {}

  unitFile(name: string): string {
    return join(this.unitDir, unitName(name));
  }

  private async run(args: string[]): Promise<void> {
    const result = await this.systemctl(args);
    if (result.exitCode !== 0) {
      throw new ServiceError(`systemctl ${args.join(" ")} failed (exit ${result.exitCode}): ${result.stderr.trim()}`);
    }
  }
}

export function unitName(name: string): string {
  return `keelson-${name}.service`;
}

/** systemd's own quoting: double quotes, with backslash, quote and specifier % escaped. */
function quote(word: string): string {
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(word)) return word;
  return `"${word.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%")}"`;
}

export function renderUnit(spec: ServiceSpec): string {
  const lines = [
    "# Written by keelson-agent; changes are overwritten.",
    "[Unit]",
    `Description=Keelson: ${spec.description}`,
    "After=network-online.target",
    "Wants=network-online.target",
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${[spec.command, ...spec.args].map(quote).join(" ")}`,
  ];
  if (spec.cwd) lines.push(`WorkingDirectory=${spec.cwd}`);
  if (spec.environmentFile) lines.push(`EnvironmentFile=${spec.environmentFile}`);
  for (const [key, value] of Object.entries(spec.env ?? {})) lines.push(`Environment=${quote(`${key}=${value}`)}`);
  if (spec.keepChildrenOnStop) lines.push("Delegate=yes", "KillMode=process");
  lines.push(
    "Restart=always",
    "RestartSec=2",
    `TimeoutStopSec=${Math.ceil((spec.stopTimeoutMs ?? 10_000) / 1000)}`,
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  );
  return lines.join("\n");
}
