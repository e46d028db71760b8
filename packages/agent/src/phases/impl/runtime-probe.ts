import { copyFileSync, existsSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { readTextOrUndefined, writeFileAtomic } from "../../services/atomic-file.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { CGROUP_DRIVER } from "./containerd-config.ts";

/**
 * A node is only ready when its runtime can start a container: containerd answering `ctr
 * version` says nothing about runc, cgroups, namespaces or mounts. The probe runs `/bin/true` in
 * a short-lived container (`ctr run --rm`) from a one-binary rootfs the phase prepares from a
 * static busybox (the node package's `bin/busybox`, else the system's), in a namespace of its
 * own so the kubelet's `k8s.io` never sees it.
 */

const PROBE_NAMESPACE = "keelson-probe";

function probeDir(ctx: PhaseContext): string {
  return join(ctx.paths.keelsonVar, "runtime-probe");
}

/** The rootfs: bin/busybox and bin/true -> busybox. Copied, so the probe needs nothing outside it. */
export function prepareProbeRootfs(ctx: PhaseContext): string {
  const rootfs = join(probeDir(ctx), "rootfs");
  const bin = join(rootfs, "bin");
  if (!existsSync(join(bin, "true"))) {
    const busybox = ctx.binary("busybox", { fallbackDirs: ctx.config.systemBinDirs });
    mkdirSync(bin, { recursive: true });
    copyFileSync(busybox, join(bin, "busybox"));
    symlinkSync("busybox", join(bin, "true"));
  }
  return rootfs;
}

/** The pid of containerd the last passing probe ran against (status probes again after a restart). */
function recordFile(ctx: PhaseContext): string {
  return join(probeDir(ctx), "last-pass.json");
}

export function probedPid(ctx: PhaseContext): number | undefined {
  try {
    return (JSON.parse(readTextOrUndefined(recordFile(ctx)) ?? "{}") as { pid?: number }).pid;
  } catch {
    return undefined;
  }
}

/**
 * The kubelet talks to containerd through its CRI plugin, which containerd skips (and keeps
 * running without) when it cannot load it: a runtime without it is no Kubernetes runtime.
 */
async function expectCriPlugin(ctx: PhaseContext, ctr: string): Promise<void> {
  const plugins = await ctx.run(ctr, ["--address", ctx.paths.containerdSocket, "plugins", "ls"], { timeoutMs: 10_000 });
  const cri = /^io\.containerd\.grpc\.v1\s+cri\s+\S+\s+(\S+)/m.exec(plugins.stdout);
  if (cri?.[1] !== "ok") {
    throw new PhaseError(
      cri
        ? `containerd's CRI plugin did not load (status ${cri[1]}); the kubelet cannot use this runtime`
        : "containerd runs without its CRI plugin (disabled or not built in); the kubelet cannot use this runtime",
    );
  }
}

/** Runs and removes one container; throws with containerd's and runc's own words when it cannot. */
export async function probeRuntime(ctx: PhaseContext, containerdPid: number | null): Promise<void> {
  const rootfs = prepareProbeRootfs(ctx);
  const ctr = ctx.binary("ctr");
  await expectCriPlugin(ctx, ctr);
  const base = ["--address", ctx.paths.containerdSocket, "--namespace", PROBE_NAMESPACE];
  const id = `keelson-probe-${process.pid}-${Date.now()}`;
  const args = [
    ...base,
    "run",
    "--rm",
    "--runc-binary",
    ctx.binary("runc", { fallbackDirs: ctx.config.systemBinDirs }),
  ];
  // Under systemd the containers' cgroups are systemd's, as the CRI plugin will make them.
  if (ctx.services.kind === "systemd" && CGROUP_DRIVER === "systemd") args.push("--runc-systemd-cgroup");
  // runc's state and ctr's FIFOs under the host root too (their defaults are in /run/containerd).
  args.push(
    "--runc-root",
    join(ctx.paths.containerdState, "runc"),
    "--fifo-dir",
    join(ctx.paths.containerdState, "fifo"),
  );
  args.push("--rootfs", rootfs, id, "/bin/true");
  const result = await ctx.run(ctr, args, { allowFailure: true, timeoutMs: 30_000 });
  if (result.exitCode !== 0) {
    // `--rm` does not remove a container whose task never started.
    await ctx.run(ctr, [...base, "containers", "rm", id], { allowFailure: true, timeoutMs: 10_000 });
    const words = (result.stderr.trim() || result.stdout.trim()).split("\n").slice(-3).join(" ");
    throw new PhaseError(`the container runtime cannot start a container (ctr run ${id}): ${words}`);
  }
  const left = await ctx.run(ctr, [...base, "containers", "ls", "-q"], { timeoutMs: 10_000 });
  if (left.stdout.split("\n").includes(id)) throw new PhaseError(`the runtime probe container ${id} was not removed`);
  writeFileAtomic(recordFile(ctx), `${JSON.stringify({ pid: containerdPid, at: new Date().toISOString() })}\n`);
}
