import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { keelsonSchema } from "../../packages/db/src/schema.ts";
import { databaseFor } from "../support/postgres-database.ts";
import {
  api,
  openServerStore,
  type ServerProc,
  serverDialect,
  start,
  startServer,
  waitUntil,
} from "./support/processes.ts";

describe("keelson-server as a process", () => {
  const servers: ServerProc[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop("SIGKILL");
  });

  it("serves the API, keeps data across a restart and shuts down cleanly on SIGTERM", async () => {
    const server = await startServer();
    servers.push(server);
    const admin = server.adminToken;

    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
    expect(projects.status).toBe(200);
    const project = projects.body.projects.find((p) => p.name === "default");
    expect(project).toMatchObject({ name: "default", id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const projectId = project?.id as string;

    const created = await api<{ uuid: string }>(`${server.url}/qbert/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: { name: "e2e" },
    });
    expect(created.status).toBe(200);
    const uuid = created.body.uuid;
    await waitUntil("cluster settles", async () => {
      const c = await api<{ taskStatus: string }>(`${server.url}/v4/${projectId}/clusters/${uuid}`, admin);
      return c.body.taskStatus === "success";
    });
    expect((await api(`${server.url}/v4/${projectId}/clusters`, "wrong")).status).toBe(403);

    // Graceful stop: exit code 0 and (SQLite) the WAL folded back into the database file.
    expect(await server.stop("SIGTERM")).toBe(0);
    const wal = join(server.dataDir, "keelson.sqlite-wal");
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true);
    expect(existsSync(join(server.dataDir, "keelson.sqlite"))).toBe(serverDialect() === "sqlite");

    const again = await startServer({ dataDir: server.dataDir });
    servers.push(again);
    const read = await api<{ name: string; status: string }>(`${again.url}/v3/${projectId}/clusters/${uuid}`, admin);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ name: "e2e", status: "pending" });
    const projectsAgain = await api<{ projects: { name: string }[] }>(`${again.url}/v1/projects`, admin);
    expect(projectsAgain.body.projects.filter((p) => p.name === "default")).toHaveLength(1);
    expect(await again.stop("SIGTERM")).toBe(0);
  });

  it("listens with an accept queue as deep as the kernel allows (net.core.somaxconn), not Node's 511", async () => {
    const server = await startServer();
    servers.push(server);
    const port = new URL(server.url).port;
    // `ss -ltn`: a listening socket's Send-Q is its accept queue's size.
    const listening = execFileSync("ss", ["-ltnH", `sport = :${port}`], { encoding: "utf8" });
    const [, , sendQ] = listening.trim().split(/\s+/);
    const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
    expect(Number(sendQ)).toBe(somaxconn);
    expect(somaxconn).toBeGreaterThan(511);
  });

  it("refuses to start on a schema that needs a newer keelson-server, naming both versions", async () => {
    const server = await startServer();
    servers.push(server);
    expect(await server.stop("SIGTERM")).toBe(0);
    // What a newer server's migration would have written.
    const url = serverDialect() === "postgres" ? await databaseFor(server.dataDir) : undefined;
    const store = await openServerStore(server.dataDir);
    await store.db.update(keelsonSchema).set({ minBinaryVersion: "99.0.0" });
    await store.close();
    const old = start("npx", ["--no-install", "keelson-server"], {
      KEELSON_LISTEN: "127.0.0.1:0",
      KEELSON_DATA_DIR: server.dataDir,
      KEELSON_ADMIN_TOKEN: server.adminToken,
      ...(url ? { KEELSON_DATABASE_URL: url } : {}),
    });
    expect(await old.exited).toBe(1);
    expect(old.output()).toContain("this database needs keelson-server 99.0.0 or newer, and this one is 0.1.0");
  });

  it("generates an admin token into the data dir when none is configured", async () => {
    const server = await startServer({ adminToken: "", env: { KEELSON_ADMIN_TOKEN: "" } });
    servers.push(server);
    const file = join(server.dataDir, "admin-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const { readFileSync } = await import("node:fs");
    const token = readFileSync(file, "utf8").trim();
    expect((await api(`${server.url}/v1/projects`, token)).status).toBe(200);
    expect((await api(`${server.url}/v1/projects`, "e2e-admin-token")).status).toBe(403);
    await server.stop();
  });
});
