import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, startFleet } from "./membership-harness.ts";
import { FleetAllocator, post, readyCluster } from "./rollout-harness.ts";

/**
 * What a rollout costs the database per node, counted in statements (Store.statements), not
 * in time: two clusters that differ only in their number of workers get the same restart and
 * the same upgrade (one master, then every worker in one batch, so both take the same steps
 * and time); the difference in statements over the difference in workers is the cost of one
 * more node, whatever the machine's speed. A third restart takes one worker per batch, so that
 * what each step costs counts per node as well.
 */

const PHASE_MS = 120;
const SMALL = 4;
const LARGE = 24;
const FROM = "1.30.6-kls.1";

/**
 * Statements per worker, at most. Reached on both stores: 0.25–0.5 for a restart, 0–0.2 for an
 * upgrade (the nodes' reports that arrive together are one statement, NodeReportWriter; an
 * upgrade writes the versions of the nodes back since the last progress save in one statement,
 * right before that save); before, 6 and 8 (a read per report, two row reads per node, a
 * version read per node), then 2 and 3 (a version write per node), then 2 and 2 (a statement
 * per report). How many statements the reports take depends on how they arrive (those of one
 * turn of the event loop, or of one statement's wait, share one), so the bound keeps room up to
 * one per worker: still half of a statement per report.
 */
const BOUND = {
  restart: 1,
  upgrade: 1,
};

/**
 * Statements per step of one node (a restart one worker per batch: the step's own statements,
 * its command, the node's reports and events, the progress save, grow with the workers too), at
 * most. Reached: 9.0–9.4 on SQLite and 10.35–10.7 on PostgreSQL; before, 10.4 and 11.1, when a
 * command to a host linked to the issuer was inserted pending and then claimed as sent by a
 * second UPDATE (now the insert claims it: replicas/commands.ts; agent-commands.test.ts and
 * node-reports.test.ts hold that saving). The lease renewals and presence flushes depend on
 * time, so a rollout slowed by a loaded machine takes more: the bound keeps most of a statement
 * per node of room, enough for a CI run's load, still failing when a step gains a statement.
 */
const STEP_BOUND = { sqlite: 10.4, postgres: 11.5 };

let f: Fleet;
let pool: FleetAllocator;
beforeAll(async () => {
  f = await startFleet(2 + SMALL + LARGE, { namePrefix: "stm", phaseTimeMs: PHASE_MS });
  pool = new FleetAllocator(f);
}, 60_000);
afterAll(() => f.close());

/** Statements the store ran from the request until the operation ended. */
async function statementsOf(url: string, body?: unknown): Promise<number> {
  await f.idle();
  const before = f.t.store.statements();
  const res = await post(f, url, body);
  expect(res.statusCode, res.body).toBe(200);
  await f.idle();
  return f.t.store.statements() - before;
}

describe("a rollout's statements per node", () => {
  it("grow by at most the bound per worker, for a restart and an upgrade", async () => {
    const small = await readyCluster(f, "stm-small", pool.take(1), pool.take(SMALL), { kubeRoleVersion: FROM });
    const large = await readyCluster(f, "stm-large", pool.take(1), pool.take(LARGE), { kubeRoleVersion: FROM });
    const perWorker = async (url: (clusterId: string) => string, body?: unknown) => {
      const a = await statementsOf(url(small), body);
      const b = await statementsOf(url(large), body);
      return { small: a, large: b, perWorker: (b - a) / (LARGE - SMALL) };
    };
    const restart = await perWorker((id) => `/v3/{p}/clusters/${id}/restartWorkers?batchPercent=100`);
    const upgrade = await perWorker((id) => `/v4/{p}/clusters/${id}/upgrade?type=patch`, { batchUpgradePercent: 100 });
    // One worker per batch: every step is one node, so what a step costs (its command, the
    // node's reports, the progress save) is in the difference too.
    const step = await perWorker((id) => `/v3/{p}/clusters/${id}/restartWorkers?batchPercent=1`);
    process.stderr.write(
      `[statements] ${f.t.store.dialect}: restart ${JSON.stringify(restart)}; upgrade ${JSON.stringify(upgrade)}; one node per step ${JSON.stringify(step)}\n`,
    );
    for (const clusterId of [small, large]) {
      expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
    }
    expect(restart.perWorker).toBeLessThanOrEqual(BOUND.restart);
    expect(upgrade.perWorker).toBeLessThanOrEqual(BOUND.upgrade);
    expect(step.perWorker).toBeLessThanOrEqual(STEP_BOUND[f.t.store.dialect]);
  });
});
