import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer } from "../sim/deps.ts";
import { SimAgent } from "../sim/index.ts";

/**
 * The simulator says why each link attempt failed and each link ended (SimAgentInit.onLinkEvent):
 * the replicas bench tallies these to find why a fleet stops linking (issue 17). A loopback
 * server plays the control plane's answers: a refusal before the upgrade, a close before the
 * welcome, a welcome and then a cut.
 */

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A loopback server whose upgrades `onUpgrade` answers; resolves with its ws URL. */
async function serve(onUpgrade: (wss: WebSocketServer, ...args: Parameters<WebSocketServer["handleUpgrade"]>) => void) {
  const wss = new WebSocketServer({ noServer: true });
  const server = createServer();
  server.on("upgrade", (req, socket, head) => onUpgrade(wss, req, socket, head, () => {}));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/agents/link`;
}

/** One agent that does not reconnect: its events until its first attempt fails or its link ends. */
async function eventsOf(linkUrl: string): Promise<string[]> {
  const events: string[] = [];
  const agent = new SimAgent({
    index: 1,
    hostname: "sim-00001",
    hostId: "00000000-0000-4000-8000-000000000001",
    credential: "khc_test",
    linkUrl,
    behaviour: { latencyMs: 0, failureRate: 0, random: Math.random, reconnect: false, phaseTimeMs: 0 },
    onLinkEvent: (e) => events.push(e),
  });
  const linked = await agent.connect(5_000);
  if (linked) {
    // Until the link's end is told, or 5 s.
    const deadline = Date.now() + 5_000;
    const dropped = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (events.length > 1 || Date.now() > deadline) {
          clearInterval(check);
          resolve();
        }
      }, 10);
    });
    await dropped;
  }
  await agent.stop();
  return events;
}

describe("simulated agents' link events", () => {
  it("names a refused connect by its errno code", async () => {
    const url = await serve(() => {});
    const closed = url.replace(/:\d+\//, ":1/");
    expect(await eventsOf(closed)).toEqual(["connect failed: ECONNREFUSED"]);
  });

  it("names a refusal before the upgrade by its HTTP status", async () => {
    const url = await serve((_wss, _req, socket) => {
      socket.end("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n");
    });
    expect(await eventsOf(url)).toEqual(["connect failed: HTTP 503"]);
  });

  it("names a close before the welcome by its code and reason", async () => {
    const url = await serve((wss, req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => ws.close(4008, "no hello within 10000 ms")),
    );
    expect(await eventsOf(url)).toEqual(["connect failed: close 4008 no hello within 10000 ms"]);
  });

  it("counts the welcome, then names the link's end", async () => {
    const url = await serve((wss, req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on("message", (data) => {
          const frame = JSON.parse(String(data)) as { type: string; hostId?: string };
          if (frame.type !== "hello") return;
          ws.send(
            JSON.stringify({
              type: "welcome",
              protocolVersion: 1,
              hostId: frame.hostId,
              projectId: "p",
              heartbeatMs: 5000,
            }),
          );
          // A reaped link: the server cuts the socket without a close frame.
          setTimeout(() => ws.terminate(), 50);
        });
      }),
    );
    expect(await eventsOf(url)).toEqual(["linked", "link dropped: close 1006"]);
  });
});
