import { existsSync, writeFileSync } from "node:fs";
import { release } from "node:os";
import { join } from "node:path";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import type { HostChecks } from "../config.ts";
import type { PhaseContext } from "../types.ts";
import type { DesiredFile } from "./common.ts";

/**
 * The kernel settings Kubernetes needs (modules and sysctls), applied by the misc-checks phase:
 * written where the host's boot applies them (/etc/modules-load.d, /etc/sysctl.d, under the
 * host root) and, when the agent manages the real host, applied to the running kernel too.
 */

/**
 * How a module that is in use shows itself when it is built into the kernel: built-in modules
 * are not in /proc/modules and often not under /sys/module, but what they provide is there.
 */
const MODULE_EFFECTS: Record<string, (procRoot: string) => boolean> = {
  br_netfilter: (procRoot) => existsSync(join(procRoot, "sys", "net", "bridge", "bridge-nf-call-iptables")),
  overlay: (procRoot) =>
    (readTextOrUndefined(join(procRoot, "filesystems")) ?? "")
      .split("\n")
      .some((l) => l.trim().split(/\s+/).pop() === "overlay"),
};

/** Module names match with `-` and `_` alike (the kernel treats them the same). */
const sameModule = (a: string, b: string) => a.replaceAll("-", "_") === b.replaceAll("-", "_");

/** Whether the kernel has the module: loaded, built in, or doing its work. */
export function modulePresent(host: HostChecks, name: string): boolean {
  const loaded = (readTextOrUndefined(join(host.procRoot, "modules")) ?? "")
    .split("\n")
    .some((l) => sameModule(l.split(" ")[0] ?? "", name));
  if (loaded || existsSync(join(host.sysRoot, "module", name))) return true;
  if (MODULE_EFFECTS[name]?.(host.procRoot)) return true;
  const builtin = readTextOrUndefined(join(host.modulesRoot, release(), "modules.builtin")) ?? "";
  return builtin.split("\n").some((l) => sameModule(l.trim().split("/").pop()?.replace(/\.ko$/, "") ?? "", name));
}

export function sysctlFile(procRoot: string, name: string): string {
  return join(procRoot, "sys", ...name.split("."));
}

export function hostSettingFiles(ctx: PhaseContext): DesiredFile[] {
  const { requiredModules, requiredSysctls } = ctx.config.host;
  const header = "# Written by keelson-agent (misc-checks phase): what Kubernetes needs of the kernel.";
  return [
    { path: ctx.paths.modulesLoadConf, content: [header, ...requiredModules, ""].join("\n") },
    {
      path: ctx.paths.sysctlConf,
      content: [header, ...Object.entries(requiredSysctls).map(([k, v]) => `${k} = ${v}`), ""].join("\n"),
    },
  ];
}

/**
 * Loads the missing modules and sets the sysctls on the running kernel. Only when the agent
 * manages the real host (`applyLive`): elsewhere the files wait for the host's next boot.
 * Returns what it did; failures are left for the check to name.
 */
export async function applyLive(ctx: PhaseContext): Promise<string[]> {
  const host = ctx.config.host;
  if (!host.applyLive) return [];
  const done: string[] = [];
  for (const name of host.requiredModules) {
    if (modulePresent(host, name)) continue;
    let modprobe: string;
    try {
      modprobe = ctx.binary("modprobe", { fallbackDirs: ctx.config.systemBinDirs });
    } catch (error) {
      ctx.log.warn({ module: name, err: error }, "cannot load kernel module: no modprobe");
      continue;
    }
    const result = await ctx.run(modprobe, [name], { allowFailure: true });
    if (result.exitCode === 0) done.push(`loaded ${name}`);
    else ctx.log.warn({ module: name, stderr: result.stderr }, "modprobe failed");
  }
  for (const [name, want] of Object.entries(host.requiredSysctls)) {
    const file = sysctlFile(host.procRoot, name);
    if (readTextOrUndefined(file)?.trim() === want) continue;
    try {
      // What `sysctl -w` does, without needing procps.
      writeFileSync(file, `${want}\n`);
      done.push(`set ${name}=${want}`);
    } catch (error) {
      ctx.log.warn({ sysctl: name, err: error }, "cannot set sysctl");
    }
  }
  return done;
}
