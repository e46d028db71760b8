import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in the test process, between one agent and the control plane, so a test can
 * break that agent's link alone without touching either process: `cut()` resets both halves
 * of every live connection (the agent's WebSocket sees a dropped socket with no close frame,
 * the control plane sees its session end the same way), and `refuse(true)` makes every new
 * connection fail at once, so the agent's reconnects fail until `refuse(false)`. Killing the
 * agent process is the other way to lose a link (rollout.test.ts); this one keeps the agent
 * and its running command alive across the cut.
 *
 * Every accepted pair is tracked until both of its sockets closed, and `close()` resets them
 * all, so nothing outlives the test.
 */

export interface TcpProxy {
  port: number;
  /** `http://<its address>:<port>`: give it to the agent as KEELSON_CONTROL_PLANE. */
  url: string;
  /** Resets every live connection (both sides); returns how many were cut. */
  cut(): number;
  /** While on, new connections are accepted and reset at once. */
  refuse(on: boolean): void;
  /** Where new connections go from now on (a load balancer moving clients to another replica). */
  retarget(target: { host: string; port: number }): void;
  /**
   * Arms a one-shot cut timed by the traffic: once a control-plane frame containing `marker`
   * has gone to the agent, the agent's next bytes (its first frame after it, e.g. the report it
   * sends on starting a command) are dropped and every connection is cut, with refusing on.
   * Resolves when that happened. Frames from the control plane are unmasked text, so the
   * marker can be matched; the agent's are masked, hence "its next bytes".
   */
  cutOnReply(marker: string): Promise<void>;
  /** Connections forwarded so far, cut so far, and refused so far. */
  stats(): { forwarded: number; cut: number; refused: number; live: number };
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
}

/** Starts a proxy on 127.0.0.1 (a free port), or on `listen`, forwarding to `target`. */
export async function startTcpProxy(
  target: { host: string; port: number },
  listen: { host: string; port: number } = { host: "127.0.0.1", port: 0 },
): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let current = target;
  let refusing = false;
  let closed = false;
  let trigger: { marker: string; seen: boolean; tail: string; fire(): void } | undefined;
  const counts = { forwarded: 0, cut: 0, refused: 0 };

  const reset = (pair: Pair) => {
    // An RST, not a FIN: the peer's WebSocket must see a broken connection, as on a network
    // failure, not an orderly end of stream.
    pair.client.resetAndDestroy();
    pair.upstream.resetAndDestroy();
  };

  const server: Server = createServer((client) => {
    // Errors come with every reset; the close handlers below do the bookkeeping.
    client.on("error", () => undefined);
    if (refusing || closed) {
      counts.refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = createConnection({ host: current.host, port: current.port });
    upstream.on("error", () => undefined);
    const pair: Pair = { client, upstream };
    pairs.add(pair);
    counts.forwarded++;
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on("data", (chunk: Buffer) => {
      if (trigger?.seen) {
        // Dropped, not forwarded: the control plane never hears it.
        trigger.fire();
        return;
      }
      if (!upstream.write(chunk)) client.pause();
    });
    upstream.on("drain", () => client.resume());
    upstream.on("data", (chunk: Buffer) => {
      if (trigger && !trigger.seen) {
        // A marker split across two chunks is still found: keep the previous chunk's tail.
        const text = trigger.tail + chunk.toString("latin1");
        trigger.seen = text.includes(trigger.marker);
        trigger.tail = text.slice(-trigger.marker.length);
      }
      if (!client.write(chunk)) upstream.pause();
    });
    client.on("drain", () => upstream.resume());
    client.on("end", () => upstream.end());
    upstream.on("end", () => client.end());
    // Either side going away takes the other with it (an upstream refused when the control
    // plane is down resets the agent's side too), and the pair leaves the set.
    const forget = () => {
      if (!pairs.delete(pair)) return;
      if (!client.destroyed) client.resetAndDestroy();
      if (!upstream.destroyed) upstream.resetAndDestroy();
    };
    client.once("close", forget);
    upstream.once("close", forget);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;

  const cutAll = () => {
    const live = [...pairs];
    for (const pair of live) {
      pairs.delete(pair);
      reset(pair);
    }
    counts.cut += live.length;
    return live.length;
  };

  return {
    port,
    url: `http://${listen.host}:${port}`,
    cut: cutAll,
    refuse(on) {
      refusing = on;
    },
    retarget(next) {
      current = next;
    },
    cutOnReply(marker) {
      return new Promise<void>((resolve) => {
        trigger = {
          marker,
          seen: false,
          tail: "",
          fire() {
            trigger = undefined;
            refusing = true;
            cutAll();
            resolve();
          },
        };
      });
    },
    stats: () => ({ ...counts, live: pairs.size }),
    async close() {
      closed = true;
      // A cut still armed fires now, so its promise does not hang.
      trigger?.fire();
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        reset(pair);
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
