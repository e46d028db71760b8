import type { ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";
import { openStream, restartStep } from "./sse-client.ts";

/** Events emitted in one turn of the event loop (as a rollout batch's reports arrive together). */
const TOGETHER = 5;

describe("GET /v4/{project_uuid}/events with many clients", () => {
  let t: TestApp | undefined;
  const closers: (() => void)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) close();
    await t?.close();
  });

  it("writes the events of one turn to each client in one write, one Buffer shared by every client", async () => {
    t = await createTestApp({ runOperations: false });
    const { app, projectId, token } = t;
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const path = `/v4/${projectId}/events`;
    // Every write of the server's side of each stream, as given to the response.
    const writes: unknown[][] = [];
    app.server.on("request", (req, res: ServerResponse) => {
      if (req.url !== path) return;
      const chunks: unknown[] = [];
      writes.push(chunks);
      const write = res.write.bind(res) as (chunk: unknown) => boolean;
      res.write = ((chunk: unknown) => {
        chunks.push(chunk);
        return write(chunk);
      }) as typeof res.write;
    });
    const streams = [];
    for (let i = 0; i < 3; i++) {
      const stream = await openStream(`http://127.0.0.1:${port}${path}`, token);
      closers.push(stream.close);
      streams.push(stream);
    }
    await waitFor("every stream to follow", () => app.keelson.projectEvents.size === 3);
    const opening = writes.map((w) => w.length);

    for (let n = 0; n < TOGETHER; n++) app.keelson.runner.events.emit("event", restartStep(projectId, n));
    for (const stream of streams) await waitFor("every event at every client", () => stream.events.length === TOGETHER);

    // Each client got them all, in order, each with its id.
    for (const stream of streams) {
      expect(stream.events.map((e) => e.data.operationId)).toEqual(
        Array.from({ length: TOGETHER }, (_, n) => `op-${n}`),
      );
      expect(stream.events.every((e) => typeof e.id === "number")).toBe(true);
    }
    // In one write per client, of the same Buffer: nothing encoded or copied per client.
    const after = writes.map((w, i) => w.slice(opening[i]));
    for (const chunks of after) expect(chunks).toHaveLength(1);
    const [shared] = after[0] as unknown[];
    expect(Buffer.isBuffer(shared)).toBe(true);
    for (const chunks of after) expect(chunks[0]).toBe(shared);
    expect((shared as Buffer).toString().match(/^event: operation\.step$/gm)).toHaveLength(TOGETHER);
  });
});
