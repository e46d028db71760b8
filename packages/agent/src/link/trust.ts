import { Agent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Readable } from "node:stream";
import {
  Backoff,
  type BackoffOptions,
  caCertHash,
  isCaCertificate,
  pinnedCaCertificates,
  splitPemCertificates,
} from "@keelson/protocol";
import { StateDir } from "../state-dir.ts";
import { type ControlPlanePins, lookupAt } from "./pins.ts";
import { ProxyRoutes } from "./proxy.ts";

/**
 * The agent's one home for TLS trust of the control plane (registration, the link, package
 * downloads), and of the way there: to the address pinned for its name (pins.ts) where one is,
 * through the outbound proxy (proxy.ts) where one is set.
 * With KEELSON_CA_HASH the agent trusts exactly the CA whose public key has that
 * hash (kubeadm's discovery): fetched once from the control plane's public CA bundle without
 * verification, accepted only if the hash matches, kept in the state dir and used as the only
 * trust from then on, so every reconnect verifies the server's chain and name against it.
 * Without a hash and without a kept CA, the system's CA store decides (certificates of a
 * public CA an operator configured).
 */

/** The CA kept in the state dir once accepted. */
export const TRUSTED_CA_FILE = "control-plane-ca.pem";

/** A trust that cannot be set up the way the settings ask: a restart cannot fix it (exit 78). */
export class TrustError extends Error {
  override name = "TrustError";
}

export interface TrustLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface TrustOptions {
  controlPlane: string;
  /** KEELSON_CA_HASH: one or more `sha256:<hex>`, comma-separated. */
  caHash?: string | undefined;
  stateDir: string;
  log?: TrustLog;
  signal?: AbortSignal;
  backoff?: BackoffOptions;
  /** HTTPS_PROXY, HTTP_PROXY and NO_PROXY (proxy.ts); none: every connection is direct. */
  proxy?: ProxyRoutes;
  /** The control-plane pins (pins.ts); none: DNS decides. */
  pins?: ControlPlanePins;
}

export class ControlPlaneTrust {
  /**
   * @param ca the PEM CA certificates trusted, alone; undefined: the system's store (or plain HTTP).
   * @param proxy the outbound proxy's routes; by default none.
   * @param pins the control-plane pins; by default none.
   */
  /**
   * The kept-alive connections of this trust's requests (not the global agents'): a pin change
   * starts new ones (renewConnections), so no request goes on over a connection to the old address.
   */
  private agents = keptAliveAgents();

  constructor(
    public ca: string | undefined,
    readonly proxy = new ProxyRoutes(),
    readonly pins?: ControlPlanePins,
  ) {}

  /**
   * After the pins changed: the idle connections close now, those in use when their request
   * ends, and later requests connect afresh, to the address the pins now give.
   */
  renewConnections(): void {
    const old = this.agents;
    this.agents = keptAliveAgents();
    for (const agent of [old.http, old.https]) {
      // Node's documented hook: a socket its request freed is destroyed instead of kept.
      agent.keepSocketAlive = () => false;
      for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    }
  }

  /**
   * Takes the control plane's current CA bundle as the trust, read through this trust (so the
   * answer comes from the pinned control plane itself): during a CA rotation it names the next
   * CA before that signs, and after it the previous one goes away. Failures keep the trust as it is.
   */
  async refresh(controlPlane: string, stateDir: string, log?: TrustLog): Promise<void> {
    if (!this.ca) return;
    try {
      const response = await this.fetch(caBundleUrl(new URL(controlPlane)));
      if (response.status !== 200) return;
      const cas = splitPemCertificates(await response.text())
        .filter(isCaCertificate)
        .join("");
      if (!cas || cas === this.ca) return;
      new StateDir(stateDir).writeText(TRUSTED_CA_FILE, cas, 0o644);
      this.ca = cas;
      log?.info(
        { caCertHash: splitPemCertificates(cas).map(caCertHash) },
        "the control plane's CA bundle changed; trusting it",
      );
    } catch (err) {
      log?.warn({ err: (err as Error).message }, "reading the control plane's CA bundle failed; trust unchanged");
    }
  }

  /**
   * Options for `new WebSocket(url, …)` and https.request to `url`: the CA, the pinned address's
   * `lookup`, and the proxy's agent where it goes through one (which then tunnels to that address).
   */
  connectOptions(url: string): { ca?: string; agent?: Agent; lookup?: LookupFunction } {
    const target = new URL(url);
    const agent = this.proxy.agentFor(target);
    const lookup = this.pins?.lookupFor(target.hostname);
    return { ...(this.ca ? { ca: this.ca } : {}), ...(agent ? { agent } : {}), ...(lookup ? { lookup } : {}) };
  }

  /**
   * `fetch` with this trust, pins and proxy (Node's own fetch takes neither a CA, a lookup nor a
   * proxy without undici's dispatcher).
   */
  readonly fetch: typeof fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const target = new URL(url);
    if (!this.ca && !this.proxy.agentFor(target) && !this.pins?.addressOf(target.hostname)) return fetch(input, init);
    return fetchWith(url, init ?? {}, this.connection(), 5);
  };

  /** `fetch` of `url` with this trust and proxy, connecting to `address` whatever the name's pin or DNS says. */
  fetchAt(url: string, address: string, init: RequestInit = {}): Promise<Response> {
    // A connection of its own: a kept-alive one to the name may go to another address.
    const connection = { ...this.connection(), lookup: () => lookupAt(address), fresh: true };
    return fetchWith(url, { ...init, redirect: "manual" }, connection, 0);
  }

  private connection(): Connection {
    return {
      ...(this.ca ? { ca: this.ca } : {}),
      agents: this.agents,
      proxy: this.proxy,
      ...(this.pins ? { lookup: (host: string) => this.pins?.lookupFor(host) } : {}),
    };
  }
}

/** OpenSSL's verification failures, as Node reports them on a socket (err.code). */
const CERTIFICATE_ERROR_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_SIGNATURE_FAILURE",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** Whether a connection failed because the server's certificate is not trusted. */
export function isCertificateError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code !== undefined && CERTIFICATE_ERROR_CODES.has(code);
}

/** The hashes of KEELSON_CA_HASH. */
export function pinnedHashes(caHash: string | undefined): string[] {
  return (caHash ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
}

/**
 * The trust for `controlPlane`, set up before the join token or credential goes anywhere. A
 * wrong hash throws TrustError; an unreachable control plane is retried until `signal` aborts.
 */
export async function establishTrust(options: TrustOptions): Promise<ControlPlaneTrust> {
  const url = new URL(options.controlPlane);
  const pins = pinnedHashes(options.caHash);
  const state = new StateDir(options.stateDir).ensure();
  const secure = url.protocol === "https:" || url.protocol === "wss:";
  if (!secure) {
    if (pins.length > 0) {
      throw new TrustError(
        `KEELSON_CA_HASH is set but KEELSON_CONTROL_PLANE (${options.controlPlane}) is plain HTTP: give its https:// URL`,
      );
    }
    return new ControlPlaneTrust(undefined, options.proxy, options.pins);
  }
  const kept = state.readText(TRUSTED_CA_FILE);
  if (kept) {
    if (pins.length === 0) return new ControlPlaneTrust(kept, options.proxy, options.pins);
    // The kept bundle came from the pinned control plane (a rotation's next CA too): all of it stays trusted.
    if (pinnedCaCertificates(kept, pins)) return new ControlPlaneTrust(kept, options.proxy, options.pins);
    options.log?.warn(
      { file: state.path(TRUSTED_CA_FILE) },
      "the CA kept in the state dir does not match KEELSON_CA_HASH; fetching the control plane's CA again",
    );
  } else if (pins.length === 0) {
    options.log?.warn(
      { controlPlane: options.controlPlane },
      "no KEELSON_CA_HASH: the server certificate is checked against the system's CA store only",
    );
    return new ControlPlaneTrust(undefined, options.proxy, options.pins);
  }
  const bundle = await fetchCaBundle(caBundleUrl(url), options);
  const accepted = pinnedCaCertificates(bundle, pins);
  if (!accepted) {
    const offered = splitPemCertificates(bundle).filter(isCaCertificate).map(caCertHash);
    throw new TrustError(
      `the control plane at ${url.origin} offers CA ${offered.join(", ") || "(none)"}, not KEELSON_CA_HASH ${pins.join(", ")}: ` +
        "refusing to register or link (a wrong hash, or someone between this host and the control plane)",
    );
  }
  state.writeText(TRUSTED_CA_FILE, accepted, 0o644);
  options.log?.info(
    { caCertHash: splitPemCertificates(accepted).map(caCertHash), file: state.path(TRUSTED_CA_FILE) },
    "control plane CA accepted by its hash",
  );
  return new ControlPlaneTrust(accepted, options.proxy, options.pins);
}

function caBundleUrl(controlPlane: URL): string {
  const url = new URL(controlPlane);
  url.protocol = "https:";
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/ca`;
  url.search = "";
  return url.toString();
}

/** The CA bundle, fetched without verifying the server: the hash check is what makes it trusted. */
async function fetchCaBundle(url: string, options: TrustOptions): Promise<string> {
  const backoff = new Backoff(options.backoff);
  for (;;) {
    options.signal?.throwIfAborted();
    let problem: string;
    try {
      const response = await fetchWith(
        url,
        options.signal ? { signal: options.signal } : {},
        {
          rejectUnauthorized: false,
          ...(options.proxy ? { proxy: options.proxy } : {}),
          ...(options.pins ? { lookup: (host: string) => options.pins?.lookupFor(host) } : {}),
        },
        0,
      );
      const text = await response.text();
      if (response.status === 200) return text;
      if (response.status < 500) {
        throw new TrustError(`${url} answered HTTP ${response.status}: the control plane serves no CA bundle to pin`);
      }
      problem = `${url} answered HTTP ${response.status}`;
    } catch (err) {
      if (err instanceof TrustError || options.signal?.aborted) throw err;
      problem = `cannot reach ${url}: ${(err as Error).message}`;
    }
    const delay = backoff.next();
    options.log?.warn({ problem, retryInMs: delay }, "fetching the control plane's CA failed; retrying");
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, delay);
      options.signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(options.signal?.reason);
        },
        { once: true },
      );
    });
  }
}

/** How fetchWith connects: TLS options, the proxy routes and the pins (each redirect's URL is routed afresh). */
interface Connection {
  ca?: string;
  rejectUnauthorized?: boolean;
  proxy?: ProxyRoutes;
  /** The `lookup` of a host (a pinned one); undefined: DNS. */
  lookup?: (host: string) => LookupFunction | undefined;
  /** A new connection, not a kept-alive one. */
  fresh?: boolean;
  /** Where kept-alive connections come from (the trust's own); none: Node's global agents. */
  agents?: KeptAliveAgents;
}

interface KeptAliveAgents {
  http: Agent;
  https: HttpsAgent;
}

/** As Node's global agents keep connections (keep-alive, 5 s idle, the last freed used first). */
function keptAliveAgents(): KeptAliveAgents {
  const options = { keepAlive: true, timeout: 5_000, scheduling: "lifo" } as const;
  return { http: new Agent(options), https: new HttpsAgent(options) };
}

/** A small fetch over node:http(s), for the TLS options and proxy agents Node's fetch does not take. */
function fetchWith(url: string, init: RequestInit, connection: Connection, redirectsLeft: number): Promise<Response> {
  const { proxy, lookup: lookupOf, fresh, agents, ...tls } = connection;
  const target = new URL(url);
  const kept = target.protocol === "https:" ? agents?.https : agents?.http;
  const agent = proxy?.agentFor(target) ?? (fresh ? undefined : kept);
  const lookup = lookupOf?.(target.hostname);
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  const headers = new Headers(init.headers);
  const body = init.body === undefined || init.body === null ? undefined : String(init.body);
  if (body !== undefined) headers.set("content-length", String(Buffer.byteLength(body)));
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: init.method ?? "GET",
        headers: Object.fromEntries(headers),
        ...(target.protocol === "https:" ? tls : {}),
        ...(agent ? { agent } : fresh ? { agent: false } : {}),
        ...(lookup ? { lookup } : {}),
        ...(init.signal ? { signal: init.signal } : {}),
      },
      (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (status >= 300 && status < 400 && location && init.redirect !== "manual") {
          res.resume();
          if (redirectsLeft <= 0) return reject(new Error(`too many redirects at ${url}`));
          return resolve(
            fetchWith(
              new URL(location, target).href,
              { ...init, method: "GET", body: null },
              connection,
              redirectsLeft - 1,
            ),
          );
        }
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value])
            responseHeaders.append(name, v);
        }
        const noBody = status === 204 || status === 304 || init.method === "HEAD";
        if (noBody) res.resume();
        resolve(
          new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            statusText: res.statusMessage ?? "",
            headers: responseHeaders,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
