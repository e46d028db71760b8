import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { replicas } from "@keelson/db";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFor, dropDatabaseFor } from "../../../test/support/postgres-database.ts";
import { openTestStore, TEST_DIALECT } from "./helpers.ts";

/**
 * Several servers starting at the same instant on one database (issue 17), as processes of
 * their own: on SQLite exactly one registers and the others are refused with the reason (the
 * check and the write are one IMMEDIATE transaction); on PostgreSQL replicas with their own ids
 * all start.
 */

const SERVERS = 4;
const children: ChildProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Starts one registration process; resolves with its outcome line once it printed one. */
function registration(args: object): { ready: Promise<void>; outcome: Promise<string> } {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "replica-start-child.ts"), JSON.stringify(args)],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  children.push(child);
  let out = "";
  const lines = new Promise<string[]>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const got = out.split("\n").filter(Boolean);
      if (got.length >= 2) resolve(got);
    });
    child.on("exit", (code) => reject(new Error(`registration process exited ${code}: ${out}`)));
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", () => {
      if (out.startsWith("ready\n")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`registration process exited ${code}: ${out}`)));
  });
  return { ready, outcome: lines.then((l) => l[1] as string) };
}

describe("servers starting at once on one database", () => {
  it(`${SERVERS} registrations at the same instant: on SQLite exactly one starts, the others are refused naming it`, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-start-race-"));
    // The database exists and is migrated, as after an earlier start.
    const store = await openTestStore(dataDir);
    await store.close();
    cleanups.push(async () => {
      rmSync(dataDir, { recursive: true, force: true });
      if (TEST_DIALECT === "postgres") await dropDatabaseFor(dataDir);
    });
    const where =
      TEST_DIALECT === "sqlite"
        ? { dialect: "sqlite", file: join(dataDir, "keelson.sqlite") }
        : { dialect: "postgres", url: await databaseFor(dataDir) };
    const started = Array.from({ length: SERVERS }, (_, i) => registration({ ...where, id: `cp-${i}` }));
    await Promise.all(started.map((s) => s.ready));
    const at = Date.now() + 300;
    for (const child of children) child.stdin?.write(`${at}\n`);
    const outcomes = await Promise.all(started.map((s) => s.outcome));

    const after = await openTestStore(dataDir);
    const rows = await after.db.select({ id: replicas.id }).from(replicas);
    await after.close();
    for (const child of children) child.stdin?.end();
    if (TEST_DIALECT === "sqlite") {
      const winners = outcomes.flatMap((o, i) => (o === "registered" ? [`cp-${i}`] : []));
      expect(winners).toHaveLength(1);
      for (const o of outcomes.filter((x) => x !== "registered")) {
        expect(o).toMatch(
          new RegExp(`^refused: another keelson-server \\(replica ${winners[0]}, pid \\d+ .*SQLite serves one server`),
        );
      }
      expect(rows.map((r) => r.id)).toEqual(winners);
    } else {
      expect(outcomes).toEqual(Array(SERVERS).fill("registered"));
      expect(rows.map((r) => r.id).sort()).toEqual(["cp-0", "cp-1", "cp-2", "cp-3"]);
    }
  }, 60_000);
});
