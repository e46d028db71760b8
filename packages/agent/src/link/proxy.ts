import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent, type RequestOptions } from "node:https";
import { BlockList, isIP, connect as netConnect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type ConnectionOptions, connect as tlsConnect } from "node:tls";
import { parseProxyUrl } from "@keelson/protocol";

/**
 * The agent's outbound proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, as curl reads them): which URL
 * goes through which proxy, and the http(s) agents that reach a server through it with CONNECT
 * (RFC 9110 §9.3.6), so TLS stays end to end with the control plane and its pinned CA still
 * decides. Node 20's own clients (fetch, http, ws) ignore these variables; an auto-deployed
 * instance in a private subnet reaches the world only through the cluster's httpProxy.
 */

export interface ProxySettings {
  /** For https:// and wss:// URLs (curl does not fall back to HTTP_PROXY for them, nor does this). */
  httpsProxy?: string | undefined;
  /** For http:// and ws:// URLs. */
  httpProxy?: string | undefined;
  /** Hosts reached directly (see `bypassesProxy`). */
  noProxy?: string | undefined;
}

const secure = (url: URL) => url.protocol === "https:" || url.protocol === "wss:";

/**
 * Whether NO_PROXY names `url`'s host, with curl's rules: entries separated by commas; `*`
 * matches every host; a name matches itself and its subdomains (a leading `.` or `*.` is the
 * same); an IP address matches itself, a CIDR block its addresses; `:port` after an entry
 * limits it to that port.
 */
export function bypassesProxy(url: URL, noProxy: string | undefined): boolean {
  const host = url.hostname
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
    .toLowerCase();
  const port = url.port || (secure(url) ? "443" : "80");
  for (const raw of (noProxy ?? "").split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "*") return true;
    const [, name = "", entryPort] = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry) ??
      /^([^:]+):(\d+)$/.exec(entry) ?? [entry, entry];
    if (!name || (entryPort !== undefined && entryPort !== port)) continue;
    if (name.includes("/")) {
      if (inBlock(host, name)) return true;
    } else if (isIP(name) || isIP(host)) {
      if (isIP(name) && isIP(host) && inBlock(host, `${name}/${isIP(name) === 6 ? 128 : 32}`)) return true;
    } else {
      const domain = name.replace(/^\*?\./, "").replace(/\.$/, "");
      if (host === domain || host.endsWith(`.${domain}`)) return true;
    }
  }
  return false;
}

function inBlock(host: string, cidr: string): boolean {
  const [base = "", bits] = cidr.split("/");
  const family = isIP(base);
  if (!family || isIP(host) !== family) return false;
  try {
    const block = new BlockList();
    block.addSubnet(base, Number(bits), family === 6 ? "ipv6" : "ipv4");
    return block.check(host, family === 6 ? "ipv6" : "ipv4");
  } catch {
    return false;
  }
}

/** The proxy `url` goes through, or undefined: reached directly. */
export function proxyFor(url: URL, settings: ProxySettings): URL | undefined {
  const proxy = secure(url) ? settings.httpsProxy : settings.httpProxy;
  if (!proxy || bypassesProxy(url, settings.noProxy)) return undefined;
  // The settings were checked against this rule at start.
  return parseProxyUrl(proxy) ?? new URL(proxy);
}

/** Thrown (to the request) when the proxy answers CONNECT with anything but 2xx. */
export class ProxyRefusedError extends Error {
  override name = "ProxyRefusedError";
}

type Created = (err: Error | null, stream: Duplex) => void;

/** A byte stream to `host:port` through `proxy`'s CONNECT. */
function tunnel(proxy: URL, host: string, port: number, done: (err: Error | null, socket?: Socket) => void): void {
  const proxyPort = Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80));
  const proxyHost = proxy.hostname.replace(/^\[|\]$/g, "");
  const socket: Socket =
    proxy.protocol === "https:"
      ? tlsConnect({ host: proxyHost, port: proxyPort, ...(isIP(proxyHost) ? {} : { servername: proxyHost }) })
      : netConnect(proxyPort, proxyHost);
  const authority = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  // User info in the proxy URL (http://user:secret@proxy:3128) is sent as Basic credentials.
  const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  const auth = proxy.username ? `Proxy-Authorization: Basic ${Buffer.from(credentials).toString("base64")}\r\n` : "";
  let head = Buffer.alloc(0);
  const fail = (err: Error) => {
    socket.removeListener("data", onData);
    socket.destroy();
    done(err);
  };
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) {
      if (head.length > 16_384) fail(new ProxyRefusedError(`the proxy ${proxy.host} sent no end of its answer`));
      return;
    }
    socket.removeListener("data", onData);
    socket.removeListener("error", fail);
    const status = head.subarray(0, head.indexOf("\r\n")).toString("latin1");
    if (!/^HTTP\/1\.[01] 2\d\d\b/.test(status)) {
      socket.destroy();
      return done(new ProxyRefusedError(`the proxy ${proxy.host} refused CONNECT ${authority}: ${status}`));
    }
    const rest = head.subarray(end + 4);
    if (rest.length > 0) socket.unshift(rest);
    done(null, socket);
  };
  socket.on("data", onData);
  socket.once("error", fail);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
}

function targetOf(options: RequestOptions): { host: string; port: number } {
  return {
    host: String(options.hostname ?? options.host ?? "localhost").replace(/^\[|\]$/g, ""),
    port: Number(options.port),
  };
}

/**
 * Where the tunnel goes: the address the request's `lookup` gives (a control-plane pin, pins.ts),
 * else the name for the proxy to resolve. TLS inside the tunnel still checks the name.
 */
function tunnelHost(options: RequestOptions, host: string, done: (address: string) => void): void {
  if (!options.lookup || isIP(host)) {
    done(host);
    return;
  }
  options.lookup(host, {}, (err, address) => done(err || typeof address !== "string" ? host : address));
}

/** For https:// and wss://: TLS with the server, inside the tunnel, with the request's own TLS options (ca, servername). */
class HttpsTunnelAgent extends HttpsAgent {
  constructor(private readonly proxy: URL) {
    super();
  }

  override createConnection(options: RequestOptions, created?: Created): Duplex | null | undefined {
    const { host, port } = targetOf(options);
    tunnelHost(options, host, (address) =>
      tunnel(this.proxy, address, port, (err, raw) => {
        if (err || !raw) return created?.(err ?? new Error("no tunnel"), raw as Duplex);
        created?.(null, tlsConnect({ ...(options as ConnectionOptions), host, port, socket: raw }));
      }),
    );
    return undefined;
  }
}

/** For http:// and ws://: the tunnel itself. */
class HttpTunnelAgent extends HttpAgent {
  constructor(private readonly proxy: URL) {
    super();
  }

  override createConnection(options: RequestOptions, created?: Created): Duplex | null | undefined {
    const { host, port } = targetOf(options);
    tunnelHost(options, host, (address) =>
      tunnel(this.proxy, address, port, (err, raw) => created?.(err, raw as Duplex)),
    );
    return undefined;
  }
}

/** The agents of one set of proxy settings, one per proxy and scheme, made when first needed. */
export class ProxyRoutes {
  private readonly agents = new Map<string, HttpAgent>();

  constructor(readonly settings: ProxySettings = {}) {}

  /** The agent that reaches `url` through its proxy; undefined: directly. */
  agentFor(url: URL): HttpAgent | undefined {
    const proxy = proxyFor(url, this.settings);
    if (!proxy) return undefined;
    const key = `${secure(url)} ${proxy.href}`;
    let agent = this.agents.get(key);
    if (!agent) {
      agent = secure(url) ? new HttpsTunnelAgent(proxy) : new HttpTunnelAgent(proxy);
      this.agents.set(key, agent);
    }
    return agent;
  }
}
