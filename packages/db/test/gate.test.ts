import { describe, expect, it } from "vitest";
import { StatementGate } from "../src/store/gate.ts";

describe("StatementGate", () => {
  it("keeps a transaction's statements together, others waiting their turn in arrival order", async () => {
    const gate = new StatementGate();
    const order: string[] = [];
    const tx = gate.exclusive(async () => {
      for (let i = 0; i < 5; i++) {
        await gate.statement(() => order.push(`tx${i}`));
        // A transaction spans turns of the event loop (its statements are awaited).
        await new Promise((r) => setImmediate(r));
      }
    });
    // Sent while the transaction holds the gate: each runs after its COMMIT, in turn.
    const others = [0, 1].map((i) => gate.statement(() => order.push(`other${i}`)));
    const next = gate.exclusive(async () => {
      await gate.statement(() => order.push("tx2-0"));
    });
    await Promise.all([tx, ...others, next]);
    expect(order).toEqual(["tx0", "tx1", "tx2", "tx3", "tx4", "other0", "other1", "tx2-0"]);
  });
});
