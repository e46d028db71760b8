import { EventEmitter } from "node:events";
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { EventLog, StoredEvent } from "../src/domain/events/event-log.ts";
import { ProjectEventFanout } from "../src/domain/events/project-events.ts";
import type { Channels } from "../src/replicas/channels.ts";
import { until } from "./replica-fixtures.ts";

/**
 * How often a replica reads other replicas' events back (project-events.ts): with agents spread
 * over three replicas, every append batch of the two others notifies the rollout's owner, whose
 * waiters want those rows. Counted in reads, not time: a log whose reads wait until released.
 */

describe("other replicas' events read back", () => {
  it("one read for the notifications that came while a read ran, up to the newest id", async () => {
    const stored: StoredEvent[] = [];
    const reads: { after: number; upTo: number | undefined }[] = [];
    // The first read waits until released; the later ones answer at once.
    let release: () => void = () => {};
    let hold = true;
    const log = {
      replica: "cp-a",
      bounds: async () => ({ oldest: null, newest: 0 }),
      append: async () => {
        throw new Error("this replica appends nothing here");
      },
      async read(after: number, _scope: unknown, upTo?: number) {
        reads.push({ after, upTo });
        if (hold)
          await new Promise<void>((r) => {
            release = r;
          });
        return stored.filter((e) => e.id > after && (upTo === undefined || e.id <= upTo));
      },
    } as unknown as EventLog;
    const notify = new EventEmitter();
    const channels: Channels = {
      async listen(_channel, handler) {
        notify.on("events", handler);
        return async () => void notify.off("events", handler);
      },
      notify: async () => {},
    };
    const delivered: number[] = [];
    const fanout = new ProjectEventFanout({
      runnerEvents: new EventEmitter() as never,
      nodeEvents: new EventEmitter() as never,
      log,
      channels,
      peers: { wanted: () => true, deliver: (row) => delivered.push((row as StoredEvent).id) },
      logger: pino({ level: "silent" }),
    });
    await fanout.start();
    const append = (id: number) => {
      stored.push({ id, projectId: "p", type: "node.report", payload: "{}" });
      notify.emit("events", String(id));
    };
    append(1);
    await until("the first read runs", () => reads.length === 1);
    // Three batches of the other replicas stored and notified while that read runs.
    for (const id of [2, 3, 4]) append(id);
    hold = false;
    release();
    await fanout.settled();
    expect(reads).toEqual([
      { after: 0, upTo: 1 },
      { after: 1, upTo: 4 },
    ]);
    expect(delivered).toEqual([1, 2, 3, 4]);
    await fanout.stop();
  });
});
