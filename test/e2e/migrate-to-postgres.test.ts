import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { nodePools, nodes } from "../../packages/db/src/schema.ts";
import { openStore } from "../../packages/db/src/store/index.ts";
import { freshDatabaseUrl } from "../support/postgres-database.ts";
import { secretsKeyEnv } from "../support/secrets-key.ts";
import { api, type ServerProc, start, startServer } from "./support/processes.ts";

/**
 * The move README describes: a control plane with 1,000 clusters on SQLite is stopped, copied
 * with `keelson-server migrate-to-postgres`, and started on PostgreSQL with the same data dir
 * (its secrets): every read answers the same bytes as before.
 */

const CLUSTERS = 1000;
/** Clusters that get a master and a worker row each (JSON facts and phases included). */
const WITH_NODES = 200;

const servers: ServerProc[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop("SIGKILL");
});

async function reads(server: ServerProc, projectId: string, sample: string[]): Promise<Map<string, string>> {
  const urls = [
    "/v1/projects",
    "/v1/hosts",
    `/v4/${projectId}/clusters`,
    `/v3/${projectId}/clusters`,
    `/v4/${projectId}/nodes`,
    `/v3/${projectId}/nodes`,
    `/v4/${projectId}/cloudProviders`,
    `/v4/${projectId}/nodePools`,
    `/v4/${projectId}/operations`,
    ...sample.flatMap((id) => [
      `/v4/${projectId}/clusters/${id}`,
      `/v3/${projectId}/clusters/${id}`,
      `/v4/${projectId}/clusters/${id}/nodes`,
    ]),
  ];
  const bodies = new Map<string, string>();
  for (const url of urls) {
    const res = await fetch(`${server.url}${url}`, { headers: { "x-auth-token": server.adminToken } });
    expect(res.status, url).toBe(200);
    bodies.set(url, await res.text());
  }
  return bodies;
}

describe("moving a control plane from SQLite to PostgreSQL", () => {
  it("copies 1,000 clusters with their nodes and operations; the server on PostgreSQL answers every read alike", async () => {
    let server = await startServer();
    servers.push(server);
    const admin = server.adminToken;
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const ids: string[] = [];
    for (let i = 0; i < CLUSTERS; i++) {
      const res = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, admin, {
        method: "POST",
        body: { name: `moved-${i}`, tags: { zeta: String(i), alpha: "first key last" }, certExpiryHrs: 1 + (i % 48) },
      });
      expect(res.status).toBe(200);
      ids.push(res.body.uuid);
    }
    // Refused while the server runs: its latest writes are in the WAL, and it keeps writing.
    const early = start("npx", ["--no-install", "keelson-server", "migrate-to-postgres"], {
      KEELSON_DATA_DIR: server.dataDir,
      KEELSON_DATABASE_URL: await freshDatabaseUrl(),
    });
    expect(await early.exited).toBe(1);
    expect(early.output()).toContain("keelson-server is running on this data dir or did not stop cleanly");
    expect(await server.stop("SIGTERM")).toBe(0);

    // Nodes as the agents' reports leave them, written while the server is stopped.
    const sqlite = await openStore({
      dialect: "sqlite",
      file: join(server.dataDir, "keelson.sqlite"),
      binaryVersion: "0.1.0",
    });
    const poolId = (await sqlite.db.select({ id: nodePools.id }).from(nodePools))[0]?.id as string;
    const rows = ids.slice(0, WITH_NODES).flatMap((clusterId, i) =>
      [1, 0].map((isMaster) => ({
        id: randomUUID(),
        projectId,
        nodePoolId: poolId,
        clusterId,
        name: `host-${i}-${isMaster ? "m" : "w"}`,
        primaryIp: `10.${Math.floor(i / 250)}.${i % 250}.${10 + isMaster}`,
        status: i % 7 === 0 ? "failed" : "ok",
        isMaster,
        apiResponding: isMaster,
        facts: { zeta: { cpus: 4 }, alpha: [`eth${i}`], é: "ünïcode" },
        phases: [{ order: 10, name: "etcd", state: "running" }],
        agentVersion: "0.1.0",
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
      })),
    );
    for (let i = 0; i < rows.length; i += 200) await sqlite.db.insert(nodes).values(rows.slice(i, i + 200));
    await sqlite.close();

    const sample = ids.filter((_, i) => i % 50 === 0 || i === WITH_NODES - 1);
    server = await startServer({ dataDir: server.dataDir });
    servers.push(server);
    const before = await reads(server, projectId, sample);
    expect(JSON.parse(before.get(`/v4/${projectId}/clusters`) as string)).toHaveLength(CLUSTERS);
    expect(await server.stop("SIGTERM")).toBe(0);

    const url = await freshDatabaseUrl();
    const env = { KEELSON_DATA_DIR: server.dataDir, KEELSON_DATABASE_URL: url };
    const move = start("npx", ["--no-install", "keelson-server", "migrate-to-postgres"], env);
    expect(await move.exited, move.output()).toBe(0);
    const output = move.output();
    expect(output).toMatch(/copying clusters: 1000\/1000 rows/);
    expect(output).toMatch(/clusters\s+1000\s+1000\s+[0-9a-f]{16} same/);
    expect(output).toMatch(new RegExp(`nodes\\s+${WITH_NODES * 2}\\s+${WITH_NODES * 2}\\s+[0-9a-f]{16} same`));
    expect(output).toMatch(/operations\s+1000\s+1000\s+[0-9a-f]{16} same/);
    expect(output).not.toContain(decodeURIComponent(new URL(url).password));

    // A second run finds the target in use and changes nothing.
    const again = start("npx", ["--no-install", "keelson-server", "migrate-to-postgres"], env);
    expect(await again.exited).toBe(1);
    expect(again.output()).toMatch(/the target database is not empty: projects has \d+ rows/);

    server = await startServer({ dataDir: server.dataDir, env: { KEELSON_DATABASE_URL: url, ...secretsKeyEnv() } });
    servers.push(server);
    const after = await reads(server, projectId, sample);
    for (const [path, body] of before) expect(after.get(path), path).toBe(body);
    expect(await server.stop("SIGTERM")).toBe(0);
  });
});
