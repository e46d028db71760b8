import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../../../test/support/postgres.ts";
import { keelsonSchema } from "../src/schema.ts";
import { openStore, type Store } from "../src/store/index.ts";
import { optionsFor } from "./store-options.ts";

/**
 * PostgreSQL restarted under a busy pool: once it is back, the store answers again within about
 * a second. postgres.js's own reconnect delay grows with every failed connect of the pool (its
 * count is shared) up to 10–20 s, so after a restart of a few seconds under load the queries
 * waited 7–17 s for a connection (the operations' leases ran out meanwhile, again and again).
 */

let pg: PostgresServer;
let store: Store;

beforeAll(async () => {
  pg = await startPostgres();
  store = await openStore(await optionsFor("postgres", await pg.createDatabase()));
}, 60_000);

afterAll(async () => {
  await store?.close();
  await pg?.stop();
}, 30_000);

describe("the PostgreSQL store across a server restart", () => {
  it("answers every caller again within 2 s of the server being back, however many connects failed meanwhile", async () => {
    let backAt = Number.POSITIVE_INFINITY;
    let stop = false;
    const firstAnswerAfterBack: number[] = [];
    // Six callers asking all the time, as a busy control plane does (reports, renewals, requests).
    const callers = Array.from({ length: 6 }, async () => {
      let answered = false;
      for (let i = 0; !stop && i < 100_000; i++) {
        const began = Date.now();
        try {
          await store.db.select().from(keelsonSchema);
          if (began >= backAt && !answered) {
            answered = true;
            firstAnswerAfterBack.push(Date.now() - backAt);
          }
        } catch {
          await sleep(20);
        }
      }
    });
    await sleep(300);
    await pg.restart(3_000);
    backAt = Date.now();
    const deadline = Date.now() + 25_000;
    while (firstAnswerAfterBack.length < 6 && Date.now() < deadline) await sleep(50);
    stop = true;
    await Promise.all(callers);
    expect(firstAnswerAfterBack).toHaveLength(6);
    expect(Math.max(...firstAnswerAfterBack)).toBeLessThan(2_000);
  }, 60_000);
});
