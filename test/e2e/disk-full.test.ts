import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { api, LOG_LEVEL, logRecords, type ServerProc, startServer, waitUntil } from "./support/processes.ts";
import { mountTmpfs, type Tmpfs } from "./support/tmpfs.ts";

/**
 * The control plane's data dir on a 4 MiB tmpfs, filled for real: SQLite and the data dir's
 * files meet ENOSPC as on an operator's full disk. (Runs on SQLite only: with PostgreSQL the
 * database's disk is elsewhere; its disk_full answer is tested in the control plane's
 * storage-full test.)
 */
describe("keelson-server with its data dir's disk full", () => {
  const servers: ServerProc[] = [];
  let disk: Tmpfs | undefined;
  afterAll(async () => {
    for (const s of servers) await s.stop("SIGKILL");
    disk?.remove();
  });

  it("refuses writes with 507 storage_full, serves reads, says so on /readyz, starts again on the full disk (its WAL kept, or folded away by a clean stop), and loses nothing once space returns", async () => {
    // Room for the clean stop's checkpoint after space returns: it copies the WAL (about 1.7 MB
    // by then: the migrations and every write since the start) into the database file, which
    // grows while the WAL is still there. On 2 MiB it met ENOSPC and kept the WAL.
    disk = mountTmpfs("4m");
    const dataDir = join(disk.dir, "data");
    mkdirSync(dataDir);
    const server = await startServer({ dataDir });
    servers.push(server);
    const admin = server.adminToken;
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const clustersUrl = (s: ServerProc) => `${s.url}/v4/${projectId}/clusters`;
    const names = async (s: ServerProc) => {
      const list = await api<{ name: string }[]>(clustersUrl(s), admin);
      expect(list.status).toBe(200);
      return list.body.map((c) => c.name).sort();
    };
    const create = (s: ServerProc, name: string) => api(clustersUrl(s), admin, { method: "POST", body: { name } });
    const readyz = async (s: ServerProc) =>
      (await api<{ status: string; conditions: { code: string; message: string }[] }>(`${s.url}/readyz`, "")).body;

    const created: string[] = [];
    for (const name of ["a", "b", "c"]) {
      expect((await create(server, name)).status).toBe(200);
      created.push(name);
    }

    // A filler takes all but 512 KiB; the server fills that with its own writes (SQLite's WAL
    // grows until a checkpoint). Removing the filler later gives the space back.
    disk.fill(512 * 1024);
    let refused: Awaited<ReturnType<typeof create>> | undefined;
    let createsUntilFull = 0;
    while (!refused && createsUntilFull < 2_000) {
      const name = `fill-${createsUntilFull}`;
      const answer = await create(server, name);
      if (answer.status === 200) {
        created.push(name);
        createsUntilFull++;
      } else refused = answer;
    }
    // Whatever the server left, take it too: nothing more fits in the data dir.
    disk.fill();
    const full = await create(server, "refused");
    expect(refused?.status).toBe(507);
    expect(full.status).toBe(507);
    const message = `the data dir ${dataDir} is full; reads work, writes are refused until space is freed there`;
    expect(full.body).toEqual({ code: "storage_full", message });
    expect(await names(server)).toEqual([...created].sort());
    expect(await readyz(server)).toMatchObject({ status: "degraded", conditions: [{ code: "storage_full", message }] });

    // A restart on the full disk: it starts (readyz answers 200), serves reads, refuses writes.
    expect(await server.stop("SIGTERM")).toBe(0);
    const again = await startServer({ dataDir });
    servers.push(again);
    expect(await names(again)).toEqual([...created].sort());
    expect((await create(again, "refused-after-restart")).body).toEqual({ code: "storage_full", message });
    expect((await readyz(again)).status).toBe("degraded");
    // Nothing written on the way: no stack trace, nothing logged above a warning but the condition.
    const everything = server.output() + again.output();
    expect(everything).not.toMatch(/\n\s+at |"stack"/);
    expect(
      logRecords(again).filter(
        (r) => (r.level as number) >= LOG_LEVEL.error && r.msg !== "storage full: writes refused until space returns",
      ),
    ).toEqual([]);

    // Space back: the probe clears the condition without a write, then writes resume.
    disk.unfill();
    const freedAt = Date.now();
    await waitUntil("readyz ready again", async () => (await readyz(again)).status === "ready", 20_000, 50);
    const recoveredMs = Date.now() - freedAt;
    expect((await create(again, "after")).status).toBe(200);
    created.push("after");
    expect(await names(again)).toEqual([...created].sort());
    expect(readdirSync(dataDir).filter((f) => f.endsWith(".tmp") || f.startsWith(".space-probe"))).toEqual([]);
    expect(await again.stop("SIGTERM")).toBe(0);

    // A clean stop folded the WAL away (no -wal, no -shm); the disk then fills while the server
    // is down. The start cannot create SQLite's 32 KiB shared-memory index: it still starts,
    // degraded from its first answer, serving reads and refusing writes.
    expect(readdirSync(dataDir).filter((f) => f.startsWith("keelson.sqlite-"))).toEqual([]);
    disk.fill();
    const third = await startServer({ dataDir });
    servers.push(third);
    expect((await readyz(third)).status).toBe("degraded");
    expect(await names(third)).toEqual([...created].sort());
    expect((await create(third, "refused-after-clean-stop")).body).toEqual({ code: "storage_full", message });
    expect(third.output()).not.toMatch(/\n\s+at |"stack"/);
    disk.unfill();
    await waitUntil("readyz ready after the third start", async () => (await readyz(third)).status === "ready", 20_000);
    expect((await create(third, "after-third")).status).toBe(200);
    created.push("after-third");
    expect(await names(third)).toEqual([...created].sort());
    expect(await third.stop("SIGTERM")).toBe(0);

    // The figures for the README and the note.
    process.stdout.write(
      `disk full (tmpfs 4 MiB): ${createsUntilFull} cluster creates filled the last 512 KiB; ` +
        `${created.length} clusters kept; /readyz ready ${recoveredMs} ms after the filler was removed\n`,
    );
  });
});
