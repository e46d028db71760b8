import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startAgent } from "./support/agents.ts";
import { issueJoinToken } from "./support/join-tokens.ts";
import {
  api,
  freePort,
  type Proc,
  type ServerProc,
  serverDialect,
  start,
  startServer,
  storeEnv,
  tempDir,
  waitUntil,
} from "./support/processes.ts";

/**
 * Replicas as real processes (issue 17): on SQLite a second server on the same data refuses to
 * start and says why (exit 78, like the other start-up refusals); on PostgreSQL a second
 * replica starts beside the first, and only a second holder of one KEELSON_REPLICA_ID is refused.
 * A crash (SIGKILL) leaves a fresh heartbeat behind, which a restart on the same machine passes.
 */

const procs: Proc[] = [];
afterAll(async () => {
  for (const p of procs) await p.stop("SIGKILL");
});

async function server(dataDir: string, replicaId: string, env: Record<string, string> = {}): Promise<ServerProc> {
  const s = await startServer({ dataDir, env: { KEELSON_REPLICA_ID: replicaId, ...env } });
  procs.push(s);
  return s;
}

/** Runs keelson-server on `dataDir` until it exits by itself; its exit code and output. */
async function runToExit(dataDir: string, replicaId: string): Promise<{ code: number | string; output: string }> {
  const proc = start("npx", ["--no-install", "keelson-server"], {
    KEELSON_LISTEN: `127.0.0.1:${await freePort()}`,
    KEELSON_ADMIN_TOKEN: "e2e-admin-token",
    KEELSON_REPLICA_ID: replicaId,
    ...(await storeEnv(dataDir)),
  });
  procs.push(proc);
  return { code: await proc.exited, output: proc.output() };
}

interface Replica {
  id: string;
  live: boolean;
  url: string;
  agentsHeld: number;
}

/** The agent links `s` holds now, by its own count (its own row in its answer). */
async function linksHeld(s: ServerProc, id: string): Promise<number> {
  const { body } = await api<Replica[]>(`${s.url}/v1/replicas`, s.adminToken);
  return body.find((r) => r.id === id)?.agentsHeld ?? 0;
}

describe("control-plane replicas on one database", () => {
  it("refuses a second server where the store cannot take one, names the holder, and starts once the first stopped", async () => {
    const dataDir = tempDir("keelson-e2e-replicas-");
    const first = await server(dataDir, "cp-1");
    const listed = (await api<Replica[]>(`${first.url}/v1/replicas`, first.adminToken)).body;
    expect(listed.map((r) => r.id)).toEqual(["cp-1"]);

    if (serverDialect() === "sqlite") {
      const { code, output } = await runToExit(dataDir, "cp-2");
      expect(code).toBe(78);
      expect(output).toMatch(
        /keelson-server: another keelson-server \(replica cp-1, pid \d+ on .*\) is using this SQLite database, and SQLite serves one server/,
      );
    } else {
      const { code, output } = await runToExit(dataDir, "cp-1");
      expect(code).toBe(78);
      expect(output).toMatch(/keelson-server: KEELSON_REPLICA_ID cp-1 is held by a live replica \(pid \d+ on /);
      const second = await server(dataDir, "cp-2");
      for (const s of [first, second]) {
        const { status, body } = await api<Replica[]>(`${s.url}/v1/replicas`, s.adminToken);
        expect(status).toBe(200);
        expect(body.map((r) => [r.id, r.live, r.url])).toEqual([
          ["cp-1", true, first.url],
          ["cp-2", true, second.url],
        ]);
      }
      await second.stop();
    }
    // The refused start changed nothing: the first still answers.
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    expect(await first.stop()).toBe(0);
    const again = await server(dataDir, "cp-2");
    const { body } = await api<Replica[]>(`${again.url}/v1/replicas`, again.adminToken);
    expect(body.map((r) => r.id)).toEqual(["cp-2"]);
    await again.stop();
  });

  it("a server killed with SIGKILL restarts at once on the same data: its own dead process holds nothing", async () => {
    const dataDir = tempDir("keelson-e2e-replicas-");
    const first = await server(dataDir, "cp-1");
    await first.stop("SIGKILL");
    const restarted = await server(dataDir, "cp-1");
    const { body } = await api<Replica[]>(`${restarted.url}/v1/replicas`, restarted.adminToken);
    expect(body.map((r) => [r.id, r.live])).toEqual([["cp-1", true]]);
    await restarted.stop();
  });

  it("an agent given several control-plane URLs links to a live one, and to another replica when its own is killed", async () => {
    const dataDir = tempDir("keelson-e2e-replicas-");
    const first = await server(dataDir, "cp-1");
    const projects = await api<{ projects: { id: string; name: string }[] }>(
      `${first.url}/v1/projects`,
      first.adminToken,
    );
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const join = await issueJoinToken(first, projectId);
    // On SQLite one server runs; the other URL is a port where nothing listens (a dead replica).
    const second = serverDialect() === "postgres" ? await server(dataDir, "cp-2") : undefined;
    const secondUrl = second?.url ?? `http://127.0.0.1:${await freePort()}`;
    const agent = await startAgent({
      name: "host-r",
      controlPlane: `${first.url},${secondUrl}`,
      joinToken: join.token,
    });
    procs.push(agent);
    const replicas = second
      ? [
          { id: "cp-1", s: first },
          { id: "cp-2", s: second },
        ]
      : [{ id: "cp-1", s: first }];
    const holder = await waitUntil(
      `the agent linked\n${agent.output()}`,
      async () => {
        for (const r of replicas) if ((await linksHeld(r.s, r.id)) === 1) return r;
        return undefined;
      },
      60_000,
    );
    if (!second) {
      expect(holder.id).toBe("cp-1");
    } else {
      await holder.s.stop("SIGKILL");
      const survivor = replicas.find((r) => r !== holder) as (typeof replicas)[number];
      await waitUntil(
        `the agent linked to ${survivor.id}\n${agent.output()}`,
        async () => (await linksHeld(survivor.s, survivor.id)) === 1,
        60_000,
      );
      expect(agent.output()).toContain("moving to the next control plane");
    }
    expect(await agent.stop()).toBe(0);
    await first.stop();
    await second?.stop();
  });

  if (serverDialect() === "postgres") {
    it("replicas with their own data dirs share their secrets through the database; one without the key refuses to start", async () => {
      const dirA = tempDir("keelson-e2e-replicas-");
      const dirB = tempDir("keelson-e2e-replicas-");
      // B's data dir on A's database: what two machines of one install have.
      const onA = await storeEnv(dirA);
      const withoutKey = start("npx", ["--no-install", "keelson-server"], {
        ...onA,
        KEELSON_DATA_DIR: dirB,
        KEELSON_SECRETS_KEY_FILE: "",
        KEELSON_LISTEN: `127.0.0.1:${await freePort()}`,
        KEELSON_REPLICA_ID: "cp-b",
      });
      procs.push(withoutKey);
      expect(await withoutKey.exited, withoutKey.output()).toBe(78);
      expect(withoutKey.output()).toContain("keelson-server: KEELSON_SECRETS_KEY_FILE is required on PostgreSQL");
      expect(existsSync(join(dirB, "secret.key"))).toBe(false);

      // No KEELSON_ADMIN_TOKEN: the admin token is the shared one.
      const a = await server(dirA, "cp-a", { KEELSON_ADMIN_TOKEN: "" });
      const b = await server(dirB, "cp-b", { ...onA, KEELSON_DATA_DIR: dirB, KEELSON_ADMIN_TOKEN: "" });
      const fileOf = (dir: string, name: string) => readFileSync(join(dir, name), "utf8");
      for (const name of ["secret.key", "webcli.key", "admin-token"])
        expect(fileOf(dirB, name)).toBe(fileOf(dirA, name));
      const adminOfA = fileOf(dirA, "admin-token").trim();
      expect(adminOfA).toMatch(/^kadm_/);
      const { status, body } = await api<Replica[]>(`${b.url}/v1/replicas`, adminOfA);
      expect(status).toBe(200);
      expect(body.map((r) => r.id).sort()).toEqual(["cp-a", "cp-b"]);
      await b.stop();
      await a.stop();
    });
  }
});
