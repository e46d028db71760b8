import { describe, expect, it } from "vitest";
import { EventStreamParser, followResuming, type StreamEvent } from "../src/event-stream.ts";

/**
 * The events-stream client's parts without a server: the parser (WHATWG HTML "interpreting an
 * event stream"), and the follower's resume and give-up rules with a scripted `connect`. The
 * CLI's and console's tests run both against a real control plane.
 */

describe("EventStreamParser", () => {
  it("reads event, data and id; an id-only block sets the last id without an event; comments pass", () => {
    const p = new EventStreamParser();
    expect(p.push(": keelson events\n\nid: 41\n\n")).toEqual([]);
    expect(p.lastEventId).toBe("41");
    // Split anywhere, CRLF line ends, a block without id keeps none of its own.
    expect(p.push('id: 42\r\nevent: operation.started\r\ndata: {"a":')).toEqual([]);
    expect(p.push('1}\r\n\r\nevent: events.lost\ndata: {"b":2}\n\n: heartbeat\n\n')).toEqual([
      { id: "42", name: "operation.started", data: { a: 1 } },
      { name: "events.lost", data: { b: 2 } },
    ]);
    expect(p.lastEventId).toBe("42");
  });

  it("drops a block whose data is not a JSON object", () => {
    const p = new EventStreamParser("7");
    expect(p.push("id: 8\nevent: x\ndata: not json\n\nevent: y\ndata: 3\n\n")).toEqual([]);
    expect(p.lastEventId).toBe("8");
  });
});

/** A connect that answers each call from `script` in turn: text blocks, or an error thrown. */
function scripted(script: (string[] | Error)[]) {
  const asked: (string | undefined)[] = [];
  const connect = async (lastEventId: string | undefined) => {
    asked.push(lastEventId);
    const next = script.shift();
    if (next === undefined) return (async function* () {})();
    if (next instanceof Error) throw next;
    return (async function* () {
      for (const text of next) yield text;
    })();
  };
  return { asked, connect };
}

class Refused extends Error {}

describe("followResuming", () => {
  it("resumes after the last id handled, skips what it already handled, and stops when closed", async () => {
    const { asked, connect } = scripted([
      [": open\n\nid: 10\n\n", 'id: 11\nevent: a\ndata: {"n":11}\n\n'],
      new Error("connection refused"),
      // A replay that starts one too early (an intermediary's doing): 11 is not handled twice.
      ['id: 11\nevent: a\ndata: {"n":11}\n\nid: 12\nevent: a\ndata: {"n":12}\n\n'],
    ]);
    const got: StreamEvent[] = [];
    const drops: number[] = [];
    const stream = followResuming({
      connect,
      retryable: () => true,
      giveUpMs: 10_000,
      onEvent: (e) => got.push(e),
      onDrop: (_r, attempt) => drops.push(attempt),
    });
    await stream.opened;
    for (let i = 0; i < 200 && got.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    stream.close();
    await stream.done;
    expect(got.map((e) => e.id)).toEqual(["11", "12"]);
    expect(asked.slice(0, 3)).toEqual([undefined, "11", "11"]);
    expect(drops.slice(0, 2)).toEqual([1, 2]);
  });

  it("gives up at once on a refusal that asking again will not change", async () => {
    const { asked, connect } = scripted([[": open\n\nid: 5\n\n"], new Refused("400 bad id")]);
    const stream = followResuming({
      connect,
      retryable: (e) => !(e instanceof Refused),
      giveUpMs: 10_000,
      onEvent: () => undefined,
    });
    await stream.opened;
    await expect(stream.done).rejects.toThrow("the events stream was refused: 400 bad id");
    expect(asked).toEqual([undefined, "5"]);
  });

  it("a first opening that fails ends a command's follower at once, unless told to retry it", async () => {
    const once = followResuming({
      ...scripted([new Error("unreachable")]),
      retryable: () => true,
      giveUpMs: 10_000,
      onEvent: () => undefined,
    });
    await expect(once.opened).rejects.toThrow("unreachable");
    const page = scripted([new Error("unreachable"), [": open\n\n"]]);
    const retried = followResuming({
      ...page,
      retryable: () => true,
      retryOpen: true,
      giveUpMs: 10_000,
      onEvent: () => undefined,
    });
    await retried.opened;
    retried.close();
    expect(page.asked).toEqual([undefined, undefined]);
  });
});
