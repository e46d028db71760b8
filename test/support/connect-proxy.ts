import { createServer, type IncomingMessage } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";

/**
 * STAND-IN, for tests: an HTTP proxy on loopback that serves CONNECT only (what a squid or
 * tinyproxy does for https:// through it, RFC 9110 §9.3.6) and notes every tunnel asked for,
 * so a test can count which connections went through a proxy and to where. Other methods
 * (an absolute-URI GET) answer 405; with `refuse` set, CONNECT answers 407. Every tunnel is
 * tracked and destroyed by `close()`, so nothing outlives the test.
 */
export interface ConnectProxy {
  /** `http://127.0.0.1:<port>`: for HTTPS_PROXY / HTTP_PROXY. */
  url: string;
  /** The authority of every CONNECT, in order (`127.0.0.1:8443`), refused ones too. */
  connects: string[];
  /** The Proxy-Authorization header of each CONNECT ("" without one), in the same order. */
  credentials: string[];
  /** Tunnels open now. */
  open(): number;
  /** While set, CONNECT answers 407 Proxy Authentication Required. */
  refuse: boolean;
  close(): Promise<void>;
}

export async function startConnectProxy(): Promise<ConnectProxy> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const server = createServer((_req, res) => {
    res.writeHead(405, { allow: "CONNECT" }).end();
  });
  let tunnels = 0;
  const proxy: ConnectProxy = {
    url: "",
    connects: [],
    credentials: [],
    open: () => tunnels,
    refuse: false,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
  server.on("connection", track);
  server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
    const authority = req.url ?? "";
    proxy.connects.push(authority);
    proxy.credentials.push(req.headers["proxy-authorization"] ?? "");
    if (proxy.refuse) {
      client.end("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n");
      return;
    }
    const [, host = "", port = ""] = /^\[?([^\]]+?)\]?:(\d+)$/.exec(authority) ?? [];
    const upstream = connect(Number(port), host);
    track(upstream);
    tunnels++;
    let counted = true;
    const done = () => {
      if (counted) tunnels--;
      counted = false;
      client.destroy();
      upstream.destroy();
    };
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once("error", () => {
      if (client.writable) client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
      done();
    });
    client.once("error", done);
    client.once("close", done);
    upstream.once("close", done);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
