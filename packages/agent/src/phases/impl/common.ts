import { createHash } from "node:crypto";
import type { PhaseId } from "@keelson/protocol";
import { readTextOrUndefined, writeFileIfChanged } from "../../services/atomic-file.ts";
import { childPath } from "../../services/child-path.ts";
import type { ServiceSpec, ServiceStatus } from "../../services/types.ts";
import { type Phase, type PhaseContext, PhaseError } from "../types.ts";
import { expectPortsFree } from "./port-check.ts";

/** Identity helper that gives phase objects their contextual type. */
export function definePhase(phase: Phase): Phase {
  return phase;
}

export interface DesiredFile {
  path: string;
  content: string;
  mode?: number;
}

/** Writes the files that differ; returns the paths it wrote. */
export function writeFiles(files: DesiredFile[]): string[] {
  return files.filter((f) => writeFileIfChanged(f.path, f.content, f.mode ?? 0o644)).map((f) => f.path);
}

/** Throws naming every file that is missing or no longer what the node config says. */
export function expectFiles(files: DesiredFile[]): void {
  const problems: string[] = [];
  for (const file of files) {
    const actual = readTextOrUndefined(file.path);
    if (actual === undefined) problems.push(`${file.path} is missing`);
    else if (actual !== file.content) problems.push(`${file.path} differs from the node's configuration`);
  }
  if (problems.length > 0) throw new PhaseError(problems.join("; "));
}

/** Short content hash: put in a service's environment so a config change means a restart. */
export function hashOf(...parts: (string | undefined)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part ?? "\0");
  return hash.digest("hex").slice(0, 16);
}

/** The environment every service gets: PATH, plus the node binary for the stand-ins. */
export function serviceEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: childPath(),
    KEELSON_NODE_BIN: process.execPath,
    ...extra,
  };
}

/** serviceEnv with the hash of the service's configuration files, so a changed file means a restart. */
export function configuredServiceEnv(...configFiles: string[]): Record<string, string> {
  return serviceEnv({ KEELSON_CONFIG_HASH: hashOf(...configFiles.map((path) => readTextOrUndefined(path))) });
}

/**
 * Installs the spec and brings the service up healthy. A changed spec (new flags, new config
 * hash) restarts a running service so it picks the change up. `ports` are the TCP ports it
 * listens on (on the primary IP): one held by another process fails the phase at once.
 */
export async function ensureService(
  ctx: PhaseContext,
  spec: ServiceSpec,
  ports: number[] = [],
): Promise<ServiceStatus> {
  const changed = await ctx.services.install(spec);
  const current = await ctx.services.status(spec.name);
  await expectPortsFree(ctx, spec.name, ports, current.pid);
  if (changed && current.pid !== null) {
    ctx.log.info({ service: spec.name }, "configuration changed; restarting service");
    await ctx.services.restart(spec.name);
  } else {
    await ctx.services.start(spec.name);
  }
  return ctx.services.waitHealthy(spec.name, { timeoutMs: ctx.config.timeouts.serviceStartMs, signal: ctx.signal });
}

export async function expectServiceRunning(ctx: PhaseContext, name: string): Promise<ServiceStatus> {
  const status = await ctx.services.status(name);
  if (status.state !== "running") throw new PhaseError(status.detail);
  return status;
}

export const NOTHING_TO_DO = undefined;

export interface ServicePhase {
  id: PhaseId;
  /** The service's name, as its spec gives it. */
  service: string;
  /** Files the service runs on, written before it starts (and checked by status). */
  files?: (ctx: PhaseContext) => DesiredFile[];
  spec: (ctx: PhaseContext, files: DesiredFile[]) => ServiceSpec;
  /** Ports it listens on: one held by another process fails the start at once, naming it. */
  ports?: (ctx: PhaseContext) => number[];
  /** The start's message, once the service is up healthy. */
  started: (ctx: PhaseContext, status: ServiceStatus) => string;
}

/**
 * A phase that keeps one service running: start writes its files and brings it up healthy
 * (restarting it when its spec changed), stop stops it, status checks the files and that it runs.
 */
export function servicePhase(p: ServicePhase): Phase {
  return {
    id: p.id,
    async start(ctx) {
      const files = p.files?.(ctx) ?? [];
      writeFiles(files);
      return { message: p.started(ctx, await ensureService(ctx, p.spec(ctx, files), p.ports?.(ctx))) };
    },
    async stop(ctx) {
      await ctx.services.stop(p.service);
      return undefined;
    },
    async status(ctx) {
      expectFiles(p.files?.(ctx) ?? []);
      await expectServiceRunning(ctx, p.service);
      return undefined;
    },
  };
}
