import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An HTTP proxy in the test process in front of a real control plane that hands events-stream
 * clients an id the server never gave: every request goes through as it is, except that the
 * first `GET /v4/{project}/events` gets, after the server's opening block, `id: <badId>` and
 * then its end (a drop). A client that resumes sends `Last-Event-ID: <badId>`, which the real
 * server refuses with its 400; the test checks that the client gives up with those words rather
 * than reconnecting without end. `streams` counts the events requests that came through.
 */
export interface BadIdProxy {
  url: string;
  streams(): number;
  /** The Last-Event-ID headers the streams came with (undefined: none). */
  resumedWith(): (string | undefined)[];
  close(): Promise<void>;
}

export async function startBadIdProxy(target: string, badId: string): Promise<BadIdProxy> {
  const upstream = new URL(target);
  const resumed: (string | undefined)[] = [];
  const server: Server = createServer((req, res) => {
    const isStream = req.method === "GET" && /^\/v4\/[^/]+\/events(\?|$)/.test(req.url ?? "");
    if (isStream) resumed.push(req.headers["last-event-id"] as string | undefined);
    const first = isStream && resumed.length === 1;
    const out = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (!first) {
          answer.pipe(res);
          return;
        }
        // The opening block (": keelson events" and the newest id) arrives first: after it, the bad id and the end.
        answer.once("data", (chunk: Buffer) => {
          res.write(chunk);
          res.end(`id: ${badId}\n\n`);
          answer.destroy();
        });
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    streams: () => resumed.length,
    resumedWith: () => [...resumed],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
