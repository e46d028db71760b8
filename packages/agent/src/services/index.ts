import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { execa } from "execa";
import type { Logger } from "pino";
import { DirectSupervisor, type DirectSupervisorOptions } from "./direct.ts";
import { type Systemctl, SystemdManager } from "./systemd.ts";
import type { ServiceManager } from "./types.ts";

export * from "./direct.ts";
export * from "./probe.ts";
export * from "./systemd.ts";
export * from "./types.ts";

export type ServiceManagerKind = "systemd" | "direct";

export interface DetectOptions {
  hostRoot: string;
  /** KEELSON_SERVICE_MANAGER: force one kind. */
  override?: string | undefined;
  /** Where systemd announces itself (tests point it elsewhere). */
  systemdMarker?: string;
  systemctl?: Systemctl;
}

/**
 * systemd when it runs this host (its /run/systemd/system marker exists and `systemctl` answers)
 * and the host root is the real root: units written under a temporary root would never be seen
 * by systemd. Everything else gets direct supervision.
 */
export async function detectServiceManagerKind(options: DetectOptions): Promise<ServiceManagerKind> {
  if (options.override === "systemd" || options.override === "direct") return options.override;
  if (options.override)
    throw new Error(`KEELSON_SERVICE_MANAGER must be "systemd" or "direct" (got "${options.override}")`);
  if (resolve(options.hostRoot) !== "/") return "direct";
  if (!existsSync(options.systemdMarker ?? "/run/systemd/system")) return "direct";
  try {
    if (options.systemctl) return (await options.systemctl(["--version"])).exitCode === 0 ? "systemd" : "direct";
    const result = await execa("systemctl", ["--version"], { reject: false, timeout: 5000 });
    return result.exitCode === 0 ? "systemd" : "direct";
  } catch {
    return "direct";
  }
}

export async function createServiceManager(
  options: DetectOptions & { log: Logger; direct?: Omit<DirectSupervisorOptions, "hostRoot" | "log"> },
): Promise<ServiceManager> {
  const kind = await detectServiceManagerKind(options);
  options.log.info({ kind }, "service manager");
  if (kind === "systemd")
    return new SystemdManager({ hostRoot: options.hostRoot, log: options.log, systemctl: options.systemctl });
  return new DirectSupervisor({ hostRoot: options.hostRoot, log: options.log, ...options.direct });
}
