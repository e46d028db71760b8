import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { readTextOrUndefined, writeFileAtomic } from "../../services/atomic-file.ts";
import type { ServiceSpec } from "../../services/types.ts";
import { type Phase, type PhaseContext, PhaseError } from "../types.ts";
import {
  configuredServiceEnv,
  definePhase,
  expectFiles,
  expectServiceRunning,
  serviceEnv,
  servicePhase,
  writeFiles,
} from "./common.ts";
import { nodeProxyEnv } from "./node-proxy.ts";
import { runtimeFiles } from "./render.ts";
import { probedPid, probeRuntime } from "./runtime-probe.ts";

/**
 * containerd accepts the file or says why (`config dump` parses it as the daemon will, and fails
 * on a file it cannot read), checked on a copy before the real file is replaced.
 */
export async function validateContainerdConfig(ctx: PhaseContext, content: string): Promise<void> {
  const candidate = `${ctx.paths.containerdConfig}.keelson-check`;
  writeFileAtomic(candidate, content);
  try {
    const result = await ctx.run(ctx.binary("containerd"), ["--config", candidate, "config", "dump"], {
      allowFailure: true,
      timeoutMs: 30_000,
    });
    if (result.exitCode !== 0) {
      throw new PhaseError(`containerd refuses the configuration it was given: ${result.stderr.trim()}`);
    }
  } finally {
    rmSync(candidate, { force: true });
  }
}

/** Configure container runtime: containerd's config.toml (mirrors), docker's daemon.json, package repos. */
export const configureRuntime = definePhase({
  id: "configure-runtime",
  async start(ctx) {
    const { present, absent } = runtimeFiles(ctx.config, ctx.paths);
    const toml = present.find((f) => f.path === ctx.paths.containerdConfig);
    if (toml) await validateContainerdConfig(ctx, toml.content);
    const written = writeFiles(present);
    for (const path of absent) rmSync(path, { force: true });
    return {
      message: written.length > 0 ? `wrote ${written.map((p) => p.split("/").pop()).join(", ")}` : "up to date",
    };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    const { present, absent } = runtimeFiles(ctx.config, ctx.paths);
    expectFiles(present);
    const stale = absent.filter((path) => readTextOrUndefined(path) !== undefined);
    if (stale.length > 0) throw new PhaseError(`${stale.join(", ")} should not exist with this cluster's settings`);
    return undefined;
  },
});

export function ctrArgs(ctx: PhaseContext, ...args: string[]): string[] {
  return ["--address", ctx.paths.containerdSocket, "--namespace", "k8s.io", ...args];
}

function containerdSpec(ctx: PhaseContext): ServiceSpec {
  const { paths } = ctx;
  return {
    name: "containerd",
    description: "container runtime",
    command: ctx.binary("containerd"),
    args: [
      "--config",
      paths.containerdConfig,
      "--address",
      paths.containerdSocket,
      "--root",
      paths.containerdRoot,
      "--state",
      paths.containerdState,
    ],
    // The cluster's proxy, for image pulls (node-proxy.ts says why containerd alone gets it).
    // A changed proxy changes the spec, so the phase's next start restarts containerd with it.
    env: { ...configuredServiceEnv(paths.containerdConfig), ...nodeProxyEnv(ctx.config) },
    // ctr talks to containerd over its socket: the same probe works for the real one.
    health: {
      kind: "exec",
      command: ctx.binary("ctr"),
      args: ["--address", paths.containerdSocket, "version"],
      env: serviceEnv(),
    },
    stopTimeoutMs: ctx.config.timeouts.serviceStopMs,
    // A runtime restart keeps the containers: their shims outlive containerd (systemd:
    // KillMode=process, Delegate=yes; the direct supervisor signals containerd's pid alone).
    keepChildrenOnStop: true,
  };
}

const containerdPhase = servicePhase({
  id: "start-runtime",
  service: "containerd",
  spec: containerdSpec,
  started: (_ctx, status) => `containerd running (pid ${status.pid})`,
});

/**
 * Start runtime: containerd supervised and healthy, and then able to run a container (the
 * probe, runtime-probe.ts). Status probes again only when containerd's pid changed: probing on
 * every poll would start a container per poll.
 */
export const startRuntime: Phase = {
  ...containerdPhase,
  async start(ctx) {
    const started = await containerdPhase.start(ctx);
    const status = await expectServiceRunning(ctx, "containerd");
    await probeRuntime(ctx, status.pid);
    return { message: `${started?.message}; a probe container ran and was removed` };
  },
  async status(ctx) {
    await containerdPhase.status(ctx);
    const status = await expectServiceRunning(ctx, "containerd");
    if (probedPid(ctx) !== status.pid) await probeRuntime(ctx, status.pid);
    return undefined;
  },
};

interface ImportRecord {
  [file: string]: { size: number; mtimeMs: number; refs: string[] };
}

function userImageTarballs(ctx: PhaseContext): string[] {
  try {
    return readdirSync(ctx.paths.userImages)
      .filter((f) => f.endsWith(".tar"))
      .sort()
      .map((f) => join(ctx.paths.userImages, f));
  } catch {
    return [];
  }
}

function importRecordFile(ctx: PhaseContext): string {
  return join(ctx.paths.keelsonVar, "user-images.json");
}

function readImportRecord(ctx: PhaseContext): ImportRecord {
  try {
    return JSON.parse(readTextOrUndefined(importRecordFile(ctx)) ?? "{}") as ImportRecord;
  } catch {
    return {};
  }
}

/** The runtime's image list, `ctr -n k8s.io images ls -q` (also images.stage / images.list). */
export async function listImages(ctx: PhaseContext): Promise<Set<string>> {
  const out = await ctx.run(ctx.binary("ctr"), ctrArgs(ctx, "images", "ls", "-q"));
  return new Set(
    out.stdout
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean),
  );
}

/**
 * Load user images: every `*.tar` in <host root>/var/lib/keelson/images is imported into the
 * runtime (namespace k8s.io) once, and again when the runtime no longer lists its images;
 * status checks that the tags each archive carried are listed.
 */
export const loadUserImages = definePhase({
  id: "load-user-images",
  async start(ctx) {
    const tarballs = userImageTarballs(ctx);
    if (tarballs.length === 0) return { message: `no user images in ${ctx.paths.userImages}` };
    const record = readImportRecord(ctx);
    const next: ImportRecord = {};
    let imported = 0;
    // An archive imported before whose images the runtime lost (removed by hand) is imported again.
    const before = await listImages(ctx);
    for (const file of tarballs) {
      const { size, mtimeMs } = statSync(file);
      const known = record[file];
      if (known && known.size === size && known.mtimeMs === mtimeMs && known.refs.every((r) => before.has(r))) {
        next[file] = known;
        continue;
      }
      const out = await ctx.run(ctx.binary("ctr"), ctrArgs(ctx, "images", "import", file));
      const refs = [...out.stdout.matchAll(/^unpacking (\S+)/gm)].map((m) => m[1]!);
      if (refs.length === 0) throw new PhaseError(`ctr imported ${file} but named no image: ${out.stdout.trim()}`);
      next[file] = { size, mtimeMs, refs };
      imported++;
    }
    writeFileAtomic(importRecordFile(ctx), `${JSON.stringify(next, null, 2)}\n`);
    const present = await listImages(ctx);
    const missing = Object.values(next)
      .flatMap((r) => r.refs)
      .filter((ref) => !present.has(ref));
    if (missing.length > 0) throw new PhaseError(`imported, but the runtime does not list ${missing.join(", ")}`);
    return { message: `${tarballs.length} archive(s), ${imported} imported now` };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    const tarballs = userImageTarballs(ctx);
    if (tarballs.length === 0) return { message: `no user images in ${ctx.paths.userImages}` };
    const record = readImportRecord(ctx);
    const notImported = tarballs.filter((f) => {
      const known = record[f];
      const { size, mtimeMs } = statSync(f);
      return !known || known.size !== size || known.mtimeMs !== mtimeMs;
    });
    if (notImported.length > 0) throw new PhaseError(`not imported yet: ${notImported.join(", ")}`);
    const present = await listImages(ctx);
    const missing = tarballs.flatMap((f) => record[f]!.refs).filter((ref) => !present.has(ref));
    if (missing.length > 0) throw new PhaseError(`the runtime no longer lists ${missing.join(", ")}`);
    return { message: `${tarballs.length} archive(s) loaded` };
  },
});
