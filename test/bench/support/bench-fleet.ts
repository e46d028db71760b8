import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask, exited, spawnNode } from "../agents/children.ts";
import { apiAs, freePort, waitReady } from "./admin-api.ts";

/**
 * A keelson-server and a simulator process beside it, for the benchmarks that drive simulated
 * nodes. The server runs alone in its process so its CPU and memory can be read from /proc.
 */
export async function startBenchFleet(options: {
  name: string;
  simWorker: string;
  adminToken: string;
  /** More server settings (KEELSON_DATABASE_URL for a run on PostgreSQL). */
  env?: Record<string, string>;
}) {
  const port = await freePort();
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
  const worker = spawnNode(["--import", "tsx", options.simWorker], {}, { ipc: true });
  const stop = async () => {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    if (worker.exitCode === null) worker.kill("SIGTERM");
    await exited(worker);
    if (server.exitCode === null) server.kill("SIGTERM");
    await exited(server);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitReady(base);
    const projects = await apiAs(options.adminToken)<{ projects: { id: string; name: string }[] }>(
      `${base}/v1/projects`,
    );
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    return { base, server, worker, pid: server.pid as number, projectId, stop };
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
  fleet: Awaited<ReturnType<typeof startBenchFleet>>,
  options: { adminToken: string; count: number; phaseTimeMs: number },
): Promise<{ uuid: string; name: string }[]> {
  const { base, worker, projectId } = fleet;
  await ask(worker, { type: "start", url: base, projectId, ...options }, "started");
  const listed = await apiAs(options.adminToken)<{ uuid: string; name: string }[]>(`${base}/v4/${projectId}/nodes`);
  return listed.body.sort((a, b) => a.name.localeCompare(b.name));
}
