import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { loadSecretCipher } from "../../packages/control-plane/src/secrets/cipher.ts";
import { clusters } from "../../packages/db/src/schema.ts";
import {
  api,
  openServerStore,
  type Proc,
  type ServerProc,
  serverDialect,
  start,
  startServer,
  storeEnv,
  tempDir,
} from "./support/processes.ts";

/**
 * The control-plane backup as an operator takes it before an upgrade and restores it to roll
 * back: `keelson-server backup` while the server runs, `keelson-server restore` on the stopped
 * server (and on a new host's empty data dir), on whichever store this run uses (SQLite's online
 * backup, or pg_dump/pg_restore). The restored server answers exactly what it answered when the
 * backup was taken, and can still unseal its secrets (a kubeconfig needs the cluster CA's key).
 */

const servers: ServerProc[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop("SIGKILL");
});

async function command(args: string[], dataDir: string): Promise<{ code: number | string; proc: Proc }> {
  const proc = start("npx", ["--no-install", "keelson-server", ...args], {
    ...(await storeEnv(dataDir)),
    KEELSON_LOG_LEVEL: "warn",
  });
  return { code: await proc.exited, proc };
}

async function snapshot(server: ServerProc, projectId: string, clusterId: string): Promise<Record<string, string>> {
  const read = async (path: string) => {
    const res = await fetch(`${server.url}${path}`, { headers: { "x-auth-token": server.adminToken } });
    expect(res.status, path).toBe(200);
    return res.text();
  };
  return {
    v4: await read(`/v4/${projectId}/clusters`),
    v3: await read(`/v3/${projectId}/clusters`),
    users: await read(`/v1/projects/${projectId}/users`),
    cluster: await read(`/v4/${projectId}/clusters/${clusterId}`),
  };
}

/**
 * The cluster CA's private key as the data dir's secret.key unseals it from the database: a
 * restore that left the old key (or made a new one) could not sign a node's certificate.
 */
async function unsealedCaKey(dataDir: string, clusterId: string): Promise<string> {
  const store = await openServerStore(dataDir);
  try {
    const [row] = await store.db.select({ key: clusters.caKeyEnc }).from(clusters).where(eq(clusters.id, clusterId));
    return loadSecretCipher(dataDir).decrypt(row?.key as string);
  } finally {
    await store.close();
  }
}

describe(`control-plane backup and restore (${serverDialect()})`, () => {
  it("backs up a running server, restores it in place and onto a new data dir, and refuses what it must", async () => {
    const server = await startServer();
    servers.push(server);
    const admin = server.adminToken;
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: { name: "kept", tags: { zeta: "last", alpha: "first" } },
    });
    expect(created.status).toBe(200);
    const clusterId = created.body.uuid;
    expect(
      (
        await api(`${server.url}/v1/projects/${projectId}/users`, admin, {
          method: "POST",
          body: { name: "alice", password: "correct horse battery" },
        })
      ).status,
    ).toBe(201);
    const before = await snapshot(server, projectId, clusterId);

    // Online: the server keeps running and serving while the backup is taken.
    const dir = join(tempDir("keelson-e2e-backup-"), "before-upgrade");
    const backup = await command(["backup", dir], server.dataDir);
    expect(backup.code, backup.proc.output()).toBe(0);
    expect(backup.proc.output()).toContain(`written to ${dir}`);
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    expect(manifest.dialect).toBe(serverDialect());
    expect(manifest.files.map((f: { name: string }) => f.name)).toContain("secret.key");

    // A change after the backup, which the restore must take back.
    expect(
      (await api(`${server.url}/v4/${projectId}/clusters`, admin, { method: "POST", body: { name: "after-backup" } }))
        .status,
    ).toBe(200);
    const running = await command(["restore", dir], server.dataDir);
    expect(running.code).toBe(1);
    expect(running.proc.output()).toMatch(
      /keelson-server is running on this data dir|keelson-server connection\(s\) are open/,
    );

    // A damaged backup is refused before anything is touched.
    const damaged = join(tempDir("keelson-e2e-backup-"), "damaged");
    cpSync(dir, damaged, { recursive: true });
    const dbFile = serverDialect() === "sqlite" ? "keelson.sqlite" : "keelson.pgdump";
    const bytes = readFileSync(join(damaged, dbFile));
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 0xff, bytes.length - 1);
    writeFileSync(join(damaged, dbFile), bytes);
    expect(await server.stop("SIGTERM")).toBe(0);
    const refused = await command(["restore", damaged], server.dataDir);
    expect(refused.code).toBe(1);
    expect(refused.proc.output()).toContain(`${join(damaged, dbFile)} does not match the backup's manifest`);

    // In place: the state of the backup, the later cluster gone.
    const restored = await command(["restore", dir], server.dataDir);
    expect(restored.code, restored.proc.output()).toBe(0);
    const again = await startServer({ dataDir: server.dataDir });
    servers.push(again);
    expect(await snapshot(again, projectId, clusterId)).toEqual(before);
    expect(await again.stop("SIGTERM")).toBe(0);
    const caKey = await unsealedCaKey(server.dataDir, clusterId);
    expect(caKey).toContain("PRIVATE KEY");

    // A new host: an empty data dir gets the database and the secrets that unseal it.
    const fresh = tempDir("keelson-e2e-restored-");
    const moved = await command(["restore", dir], fresh);
    expect(moved.code, moved.proc.output()).toBe(0);
    const elsewhere = await startServer({ dataDir: fresh });
    servers.push(elsewhere);
    expect(await snapshot(elsewhere, projectId, clusterId)).toEqual(before);
    expect(await elsewhere.stop("SIGTERM")).toBe(0);
    expect(await unsealedCaKey(fresh, clusterId)).toBe(caKey);
  });

  it("names what is wrong: no directory for restore, a directory that is not a backup, a backup over files", async () => {
    const dataDir = tempDir("keelson-e2e-backup-data-");
    writeFileSync(join(dataDir, "notes.txt"), "an operator's file\n");
    const over = await command(["backup", dataDir], dataDir);
    expect(over.code).toBe(1);
    expect(over.proc.output()).toContain(`${dataDir} exists and is not empty: name a new directory`);
    expect(readFileSync(join(dataDir, "notes.txt"), "utf8")).toBe("an operator's file\n");
    const missing = await command(["restore"], dataDir);
    expect(missing.code).toBe(78);
    expect(missing.proc.output()).toContain("restore needs the backup's directory");
    const notBackup = await command(["restore", dataDir], dataDir);
    expect(notBackup.code).toBe(1);
    expect(notBackup.proc.output()).toContain("is not a keelson backup (no manifest.json)");
  });
});
