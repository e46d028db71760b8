import { describe, expect, it } from "vitest";
import { NodeProgress } from "../src/domain/clusters/rollouts/node-progress.ts";
import type { StepContext } from "../src/runner/types.ts";

/**
 * The rule an upgrade's batched version write rests on: a save names a node in `done` only
 * after what its being done means was recorded, in one call for the nodes done since the last
 * save; a record that fails stops every later save.
 */

type Entry = { record: string[] } | { save: { started: string[]; done: string[] } };

function progressWith(record: (ids: string[]) => Promise<void>, progress: Record<string, unknown> = {}) {
  const log: Entry[] = [];
  const ctx = {
    progress,
    saveProgress: async (patch: { started: string[]; done: string[] }) => {
      await new Promise((r) => setTimeout(r, 5));
      log.push({ save: patch });
    },
  } as unknown as StepContext;
  const nodes = new NodeProgress(ctx, async (ids) => {
    await record(ids);
    log.push({ record: [...ids] });
  });
  return { nodes, log };
}

/** Every id a save names as done was recorded by an earlier entry of the log. */
function doneOnlyAfterRecorded(log: Entry[]): void {
  const recorded = new Set<string>();
  for (const entry of log) {
    if ("record" in entry) for (const id of entry.record) recorded.add(id);
    else for (const id of entry.save.done) expect(recorded, `saved ${id} as done before recording it`).toContain(id);
  }
}

describe("a rollout step's progress", () => {
  it("records the nodes done since the last save together, right before the save that names them", async () => {
    const { nodes, log } = progressWith(async () => {
      await new Promise((r) => setTimeout(r, 20));
    });
    nodes.start(["a", "b", "c"]);
    nodes.finish("a");
    nodes.finish("b");
    await nodes.flush();
    expect(log).toEqual([
      { save: { started: ["a", "b", "c"], done: [] } },
      { record: ["a", "b"] },
      { save: { started: ["a", "b", "c"], done: ["a", "b"] } },
    ]);
    nodes.finish("c");
    await nodes.flush();
    expect(log.slice(3)).toEqual([{ record: ["c"] }, { save: { started: ["a", "b", "c"], done: ["a", "b", "c"] } }]);
    doneOnlyAfterRecorded(log);
  });

  it("keeps saves in order while a record is slow, and never records a node twice", async () => {
    let slow = true;
    const { nodes, log } = progressWith(async () => {
      if (slow) await new Promise((r) => setTimeout(r, 100));
      slow = false;
    });
    nodes.finish("a");
    // The next batch starts while the first record is still being written.
    nodes.start(["b"]);
    nodes.finish("b");
    await nodes.flush();
    expect(log.map((e) => ("record" in e ? `record ${e.record}` : `save ${e.save.done}`))).toEqual([
      "record a",
      "save a",
      "save a",
      "record b",
      "save a,b",
    ]);
    doneOnlyAfterRecorded(log);
  });

  it("saves nothing more once a record failed, and flush() throws its error", async () => {
    const { nodes, log } = progressWith(async (ids) => {
      if (ids.includes("b")) throw new Error("database gone");
    });
    nodes.start(["a", "b"]);
    await nodes.flush();
    nodes.finish("b");
    await expect(nodes.flush()).rejects.toThrow("database gone");
    nodes.start(["c"]);
    await expect(nodes.flush()).rejects.toThrow("database gone");
    expect(log).toEqual([{ save: { started: ["a", "b"], done: [] } }]);
  });

  it("resumes from the saved progress without recording its done nodes again", async () => {
    const recorded: string[][] = [];
    const { nodes, log } = progressWith(async (ids) => void recorded.push(ids), { started: ["a", "b"], done: ["a"] });
    expect(nodes.done.has("a")).toBe(true);
    nodes.finish("b");
    await nodes.flush();
    expect(recorded).toEqual([["b"]]);
    expect(log.at(-1)).toEqual({ save: { started: ["a", "b"], done: ["a", "b"] } });
  });
});
