import { describe, expect, it } from "vitest";
import { StatementGate } from "../src/store/gate.ts";

/** A statement that keeps the thread busy for `ms`, as a slow SQLite statement does. */
const busy = (ms: number) => () => {
  const until = performance.now() + ms;
  while (performance.now() < until);
  return ms;
};

/** Runs `count` statements one after another, as an operation's awaited chain does; answers when the chain ended and how often a macrotask queued at its start ran in between. */
async function chain(gate: StatementGate, count: number, ms: number): Promise<{ turnsSeen: number }> {
  let turnsSeen = 0;
  let open = true;
  const tick = () => {
    if (!open) return;
    turnsSeen++;
    setImmediate(tick);
  };
  setImmediate(tick);
  for (let i = 0; i < count; i++) await gate.statement(busy(ms));
  open = false;
  return { turnsSeen };
}

describe("StatementGate", () => {
  it("lets the event loop turn once a chain of statements has run for its slice", async () => {
    // 20 statements of 0.5 ms: 10 ms of work, at least 4 turns with a 2 ms slice.
    const { turnsSeen } = await chain(new StatementGate(2), 20, 0.5);
    expect(turnsSeen).toBeGreaterThanOrEqual(4);
  });

  it("does not let it turn within the slice: a short chain runs in one go", async () => {
    const { turnsSeen } = await chain(new StatementGate(1000), 20, 0.2);
    expect(turnsSeen).toBe(0);
  });

  it("keeps a transaction's statements together, others waiting their turn, across yields", async () => {
    const gate = new StatementGate(1);
    const order: string[] = [];
    const tx = gate.exclusive(async () => {
      for (let i = 0; i < 5; i++) await gate.statement(() => order.push(`tx${i}`) && busy(0.5)());
    });
    // Queued while the transaction holds the gate: each runs after its last statement.
    const others = [0, 1].map((i) => gate.statement(() => order.push(`other${i}`)));
    await Promise.all([tx, ...others]);
    expect(order).toEqual(["tx0", "tx1", "tx2", "tx3", "tx4", "other0", "other1"]);
  });
});
