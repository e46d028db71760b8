import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";
import { FleetAllocator, readyCluster } from "./rollout-harness.ts";

/**
 * An idle cluster's status follows its masters' links (health-follower.ts): the clusters of the
 * hosts whose link came or went are looked up together at the follower's next flush, one
 * statement for all of them (after a restart of the control plane every agent links again at
 * once). Each cluster still turns `error` when its only master's agent goes and `ok` when it is
 * back, and a cluster none of whose hosts moved is left alone.
 */

let f: Fleet;
let pool: FleetAllocator;
beforeAll(async () => {
  f = await startFleet(4, { namePrefix: "chl" });
  pool = new FleetAllocator(f);
}, 60_000);
afterAll(() => f.close());

describe("cluster health follows the masters' links", () => {
  it("turns each cluster whose master's link went error, then ok once it is back", async () => {
    const [a, b, c] = [pool.take(1)[0], pool.take(1)[0], pool.take(1)[0]];
    const worker = pool.take(1)[0];
    if (!a || !b || !c || !worker) throw new Error("fleet too small");
    const first = await readyCluster(f, "chl-first", [a], [worker]);
    const second = await readyCluster(f, "chl-second", [b], []);
    const untouched = await readyCluster(f, "chl-untouched", [c], []);
    const status = async (id: string) => (await f.cluster(id, "v3")).status;

    // Both links end together (stopped agents do not reconnect by themselves).
    await Promise.all([a.stop(), b.stop()]);
    await waitFor(
      "both clusters in error",
      async () => (await status(first)) === "error" && (await status(second)) === "error",
    );
    expect(await status(untouched)).toBe("ok");

    for (const agent of [a, b]) expect(await agent.connect(10_000)).toBe(true);
    await waitFor(
      "both clusters ok again",
      async () => (await status(first)) === "ok" && (await status(second)) === "ok",
    );
    expect(await status(untouched)).toBe("ok");
  });
});
