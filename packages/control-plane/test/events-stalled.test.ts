import { get, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";
import { restartStep } from "./sse-client.ts";

/** Small, so the test fills it quickly; the setting's own minimum. */
const LIMIT = 65_536;
/** Events of the stream under test: 8 KiB each, so a few fill the limit. */
const ERROR_TEXT = "x".repeat(8_192);
/** Events emitted per round; under the limit, so a client that reads never reaches it. */
const PER_ROUND = 4;

describe("GET /v4/{project_uuid}/events with a client that stops reading", () => {
  let t: TestApp | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await t?.close();
  });

  it("ends that stream once more than the limit waits unsent, and keeps serving a client that reads", async () => {
    t = await createTestApp({ runOperations: false, settings: { eventStreamBufferBytes: LIMIT } });
    const { app, projectId, token } = t;
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const path = `/v4/${projectId}/events`;
    // The server's side of each stream, to read what it holds unsent.
    const responses: ServerResponse[] = [];
    app.server.on("request", (req, res: ServerResponse) => {
      if (req.url === path) responses.push(res);
    });

    // The stalled client: raw TCP, sends its request, reads the headers, then never reads again.
    const stalled = connect({ host: "127.0.0.1", port });
    sockets.push(stalled);
    let stalledBytes = 0;
    let stalledClosed = false;
    stalled.on("data", (chunk: Buffer) => {
      stalledBytes += chunk.length;
    });
    stalled.on("error", () => undefined);
    stalled.on("close", () => {
      stalledClosed = true;
    });
    stalled.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-auth-token: ${token}\r\n\r\n`);
    await waitFor("the stalled stream's first bytes", () => stalledBytes > 0);
    stalled.pause();
    const stalledRes = responses[0] as ServerResponse;
    // What the server holds unsent for the stalled client, after each of its writes (the last
    // one included, which the server answers by ending the stream), and its largest write (the
    // events of one turn go in one write).
    let maxUnsent = 0;
    let maxWrite = 0;
    const write = stalledRes.write.bind(stalledRes) as (chunk: string | Buffer) => boolean;
    stalledRes.write = ((chunk: string | Buffer) => {
      const ok = write(chunk);
      maxUnsent = Math.max(maxUnsent, stalledRes.writableLength);
      maxWrite = Math.max(maxWrite, Buffer.byteLength(chunk));
      return ok;
    }) as typeof stalledRes.write;

    // A client that reads, counting whole events.
    let readEvents = 0;
    let tail = "";
    const reader = await new Promise<IncomingMessage>((resolve, reject) => {
      get(`http://127.0.0.1:${port}${path}`, { agent: false, headers: { "x-auth-token": token } }, resolve).on(
        "error",
        reject,
      );
    });
    sockets.push(reader.socket);
    reader.setEncoding("utf8");
    reader.on("data", (chunk: string) => {
      const blocks = (tail + chunk).split("\n\n");
      tail = blocks.pop() ?? "";
      readEvents += blocks.filter((b) => b.includes("\nevent: operation.step\n")).length;
    });
    const readerRes = responses[1] as ServerResponse;
    expect(readerRes).toBeDefined();

    const emitted = { events: 0, bytes: 0, maxBlock: 0 };
    const event = (n: number) => restartStep(projectId, n, { error: ERROR_TEXT });
    while (!stalledRes.destroyed && emitted.events < 4_000) {
      for (let i = 0; i < PER_ROUND; i++) {
        const e = event(emitted.events);
        const block = `id: ${emitted.events + 1}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
        emitted.maxBlock = Math.max(emitted.maxBlock, Buffer.byteLength(block));
        emitted.bytes += Buffer.byteLength(block);
        app.keelson.runner.events.emit("event", e);
        emitted.events++;
      }
      // The reading client takes each round before the next, as a client that keeps up does.
      await waitFor("the reader to keep up", () => readEvents === emitted.events);
    }

    // The server ended the stalled stream, having held at most the limit and one write for it,
    // a write being at most a round's events.
    expect(stalledRes.destroyed).toBe(true);
    expect(maxUnsent).toBeGreaterThan(LIMIT);
    expect(maxWrite).toBeLessThanOrEqual(PER_ROUND * emitted.maxBlock);
    expect(maxUnsent).toBeLessThanOrEqual(LIMIT + maxWrite);
    const metrics = await app.keelson.metrics.registry.getSingleMetricAsString("keelson_event_streams_ended_total");
    expect(metrics).toMatch(/keelson_event_streams_ended_total(\{[^}]*\})? 1$/m);

    // The reader got every event and its stream stays open.
    expect(readEvents).toBe(emitted.events);
    expect(readerRes.destroyed).toBe(false);

    // The stalled client, reading again, finds its stream closed, short of what was emitted.
    stalled.resume();
    await waitFor("the stalled client to see the close", () => stalledClosed);
    expect(stalledBytes).toBeLessThan(emitted.bytes);
  });
});
