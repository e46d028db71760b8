import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask, exited, spawnNode, stopChild } from "../agents/children.ts";
import { apiAs, freePort, waitReady } from "./admin-api.ts";

/**
 * A keelson-server alone in its process (so its CPU and memory can be read from /proc), on a
 * data dir of its own; `port` to start one again where it listened before (a replica's URL).
 */
export async function startBenchServer(options: {
  name: string;
  adminToken: string;
  /** More server settings (KEELSON_DATABASE_URL for a run on PostgreSQL, KEELSON_REPLICA_ID). */
  env?: Record<string, string>;
  port?: number;
}) {
  const port = options.port ?? (await freePort());
  const dataDir = mkdtempSync(join(tmpdir(), `keelson-bench-${options.name}-`));
  const base = `http://127.0.0.1:${port}`;
  const server = spawnNode(
    // BENCH_SERVER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the server alone.
    [
      ...(process.env.BENCH_SERVER_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      "packages/control-plane/bin/keelson-server.mjs",
    ],
    {
      KEELSON_LISTEN: `127.0.0.1:${port}`,
      KEELSON_DATA_DIR: dataDir,
      KEELSON_ADMIN_TOKEN: options.adminToken,
      KEELSON_LOG_LEVEL: "warn",
      // Measured as in production: no check of outgoing link frames (see packages/protocol).
      NODE_ENV: "production",
      ...options.env,
    },
    { quiet: true },
  );
  /** SIGTERM (a graceful stop) by default; SIGKILL after 20 s. */
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    await stopChild(server, signal);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitReady(base);
    return { base, port, server, pid: server.pid as number, stop };
  } catch (err) {
    await stop("SIGKILL");
    throw err;
  }
}

export type BenchServer = Awaited<ReturnType<typeof startBenchServer>>;

/** The id of the project named "default", which every fresh database has. */
export async function defaultProjectId(base: string, adminToken: string): Promise<string> {
  const projects = await apiAs(adminToken)<{ projects: { id: string; name: string }[] }>(`${base}/v1/projects`);
  return projects.body.projects.find((p) => p.name === "default")?.id as string;
}

/** A keelson-server (startBenchServer) and a simulator process beside it, for the benchmarks that drive simulated nodes. */
export async function startBenchFleet(options: {
  name: string;
  simWorker: string;
  adminToken: string;
  /** More server settings (KEELSON_DATABASE_URL for a run on PostgreSQL). */
  env?: Record<string, string>;
}) {
  const { base, server, pid, stop: stopServer } = await startBenchServer(options);
  const worker = spawnNode(["--import", "tsx", options.simWorker], {}, { ipc: true });
  const stop = async () => {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    if (worker.exitCode === null) worker.kill("SIGTERM");
    await exited(worker);
    await stopServer();
  };
  try {
    const projectId = await defaultProjectId(base, options.adminToken);
    return { base, server, worker, pid, projectId, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Registers and links `count` simulated agents through the fleet's worker (the rollout sim
 * worker: nodes take `phaseTimeMs` to converge); the hosts as the API lists them, by name.
 */
export async function linkAgents(
  fleet: { base: string; worker: ChildProcess; projectId: string },
  options: {
    adminToken: string;
    count: number;
    phaseTimeMs: number;
    /** Several replicas' link URLs (the agents' KEELSON_CONTROL_PLANE list); default the fleet's server. */
    linkUrl?: string[];
  },
): Promise<{ uuid: string; name: string }[]> {
  const { base, worker, projectId } = fleet;
  await ask(worker, { type: "start", url: base, projectId, ...options }, "started");
  const listed = await apiAs(options.adminToken)<{ uuid: string; name: string }[]>(`${base}/v4/${projectId}/nodes`);
  return listed.body.sort((a, b) => a.name.localeCompare(b.name));
}
