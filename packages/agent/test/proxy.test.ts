import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caCertHash } from "@keelson/protocol";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { type ConnectProxy, startConnectProxy } from "../../../test/support/connect-proxy.ts";
import { ControlPlanePins } from "../src/link/pins.ts";
import { bypassesProxy, ProxyRoutes, proxyFor } from "../src/link/proxy.ts";
import { ControlPlaneTrust, establishTrust, isCertificateError } from "../src/link/trust.ts";
import { readAgentSettings } from "../src/settings.ts";
import { makePki } from "./pki-fixtures.ts";

/**
 * The agent's outbound proxy (link/proxy.ts): NO_PROXY's rules, and the agent's own clients —
 * the CA fetch, the trusted fetch (registration, downloads) and the link's WebSocket — reaching
 * a real HTTPS server on loopback through a CONNECT proxy that counts its tunnels, with the
 * pinned CA still checked end to end; directly when NO_PROXY names the host.
 */

const servers: Server[] = [];
const proxies: ConnectProxy[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe("NO_PROXY", () => {
  const cases: [string, string, boolean][] = [
    ["https://cp.example.com/", "", false],
    ["https://cp.example.com/", "*", true],
    ["https://cp.example.com/", "example.com", true],
    ["https://cp.example.com/", ".example.com", true],
    ["https://cp.example.com/", "*.example.com", true],
    ["https://example.com/", ".example.com", true],
    ["https://badexample.com/", "example.com", false],
    ["https://cp.example.com:8443/", "cp.example.com:8443", true],
    ["https://cp.example.com:8443/", "cp.example.com:443", false],
    ["https://cp.example.com/", "cp.example.com:443", true],
    ["https://10.1.2.3:8443/", "10.1.2.3", true],
    ["https://10.1.2.3:8443/", "10.1.2.4", false],
    ["https://10.1.2.3:8443/", "10.0.0.0/8", true],
    ["https://11.1.2.3:8443/", "10.0.0.0/8", false],
    ["https://[fd00::5]:8443/", "fd00::/8", true],
    ["https://[fd00::5]:8443/", "[fd00::5]:8443", true],
    ["https://10.1.2.3/", "10.1.2", false],
    ["https://cp.example.com/", "169.254.169.254, localhost ,cp.example.com", true],
  ];
  it.each(cases)("%s with NO_PROXY=%j is direct: %s", (url, noProxy, direct) => {
    expect(bypassesProxy(new URL(url), noProxy)).toBe(direct);
  });

  it("HTTPS_PROXY serves https:// and wss://, HTTP_PROXY http:// and ws://, neither falls back to the other", () => {
    const routes = new ProxyRoutes({ httpsProxy: "http://p:3128" });
    expect(routes.agentFor(new URL("https://cp:8443/"))).toBeDefined();
    expect(routes.agentFor(new URL("wss://cp:8443/v1/agent"))).toBe(routes.agentFor(new URL("https://cp:8443/")));
    expect(routes.agentFor(new URL("http://cp:8080/"))).toBeUndefined();
    expect(new ProxyRoutes({ httpProxy: "http://p:3128" }).agentFor(new URL("ws://cp:8080/"))).toBeDefined();
  });

  it("the agent's settings take HTTPS_PROXY, HTTP_PROXY and NO_PROXY, and refuse a proxy that is not a URL", () => {
    const env = { KEELSON_CONTROL_PLANE: "https://cp:8443", KEELSON_STATE_DIR: tmpdir() };
    const settings = readAgentSettings({
      ...env,
      HTTPS_PROXY: "http://proxy:3128",
      HTTP_PROXY: "http://proxy:3128",
      NO_PROXY: "localhost",
    });
    expect([settings.httpsProxy, settings.httpProxy, settings.noProxy]).toEqual([
      "http://proxy:3128",
      "http://proxy:3128",
      "localhost",
    ]);
    // host:port means http://, as curl reads it.
    const bare = readAgentSettings({ ...env, HTTPS_PROXY: "proxy:3128" });
    expect(proxyFor(new URL("wss://cp:8443/"), bare)?.href).toBe("http://proxy:3128/");
    expect(() => readAgentSettings({ ...env, HTTPS_PROXY: "socks5://proxy:1080" })).toThrow(/HTTPS_PROXY/);
    expect(() => readAgentSettings({ ...env, HTTP_PROXY: "http://proxy:3128/path" })).toThrow(/HTTP_PROXY/);
  });
});

describe("the agent's connections through a CONNECT proxy", () => {
  const dir = mkdtempSync(join(tmpdir(), "keelson-proxy-"));
  const pki = makePki(dir, "cp");

  /** An HTTPS control plane stand-in on loopback (/v1/ca, anything else `{"ok":true}`) with a WebSocket endpoint. */
  async function controlPlane() {
    const server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
      if (req.url === "/v1/ca") res.writeHead(200).end(pki.caPem);
      else res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    const wss = new WebSocketServer({ server });
    wss.on("connection", (socket) => socket.send("welcome"));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    return { url: `https://127.0.0.1:${port}`, authority: `127.0.0.1:${port}` };
  }

  /** A control plane, a counting proxy, and the agent's trust of the first with HTTPS_PROXY the second (pinned unless `pin` is false). */
  async function throughProxy(options: { noProxy?: string; pin?: boolean } = {}) {
    const cp = await controlPlane();
    const p = await startConnectProxy();
    proxies.push(p);
    const trust = await establishTrust({
      controlPlane: cp.url,
      ...(options.pin === false ? {} : { caHash: caCertHash(pki.caPem) }),
      stateDir: mkdtempSync(join(dir, "state-")),
      proxy: new ProxyRoutes({ httpsProxy: p.url, noProxy: options.noProxy }),
    });
    return { cp, p, trust };
  }

  it("pins the CA, fetches and links through HTTPS_PROXY, one tunnel each, TLS checked end to end", async () => {
    const { cp, p, trust } = await throughProxy();
    expect(p.connects).toEqual([cp.authority]);

    const res = await trust.fetch(`${cp.url}/v1/hosts/register`, { method: "POST", body: "{}" });
    expect(await res.json()).toEqual({ ok: true });
    expect(p.connects).toEqual([cp.authority, cp.authority]);

    const link = `${cp.url.replace("https:", "wss:")}/v1/agent`;
    const ws = new WebSocket(link, trust.connectOptions(link));
    const first = await new Promise<string>((resolve, reject) => {
      ws.once("message", (data) => resolve(String(data)));
      ws.once("error", reject);
    });
    expect(first).toBe("welcome");
    expect(p.connects).toHaveLength(3);
    expect(p.open()).toBe(1);
    ws.close();
  });

  it("tunnels a pinned name to its pinned address (control-plane pins), TLS still checked against the name", async () => {
    const named = makePki(dir, "named", "DNS:cp.keelson.test");
    const server = createServer({ key: named.key, cert: named.cert }, (_req, res) => res.writeHead(200).end("{}"));
    const wss = new WebSocketServer({ server });
    wss.on("connection", (socket) => socket.send("welcome"));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    const p = await startConnectProxy();
    proxies.push(p);
    const pins = ControlPlanePins.in(mkdtempSync(join(dir, "state-")), [{ name: "cp.keelson.test", ip: "127.0.0.1" }]);
    const trust = new ControlPlaneTrust(named.caPem, new ProxyRoutes({ httpsProxy: p.url }), pins);

    expect((await trust.fetch(`https://cp.keelson.test:${port}/v1/x`)).status).toBe(200);
    const link = `wss://cp.keelson.test:${port}/v1/agent`;
    const ws = new WebSocket(link, trust.connectOptions(link));
    const first = await new Promise<string>((resolve, reject) => {
      ws.once("message", (data) => resolve(String(data)));
      ws.once("error", reject);
    });
    expect(first).toBe("welcome");
    ws.close();
    expect(p.connects).toEqual([`127.0.0.1:${port}`, `127.0.0.1:${port}`]);
  });

  it("goes directly when NO_PROXY names the control plane, and the proxy sees nothing", async () => {
    const { cp, p, trust } = await throughProxy({ noProxy: "localhost,127.0.0.1" });
    expect(await (await trust.fetch(`${cp.url}/v1/x`)).json()).toEqual({ ok: true });
    expect(trust.connectOptions(`${cp.url.replace("https:", "wss:")}/v1/agent`).agent).toBeUndefined();
    expect(p.connects).toEqual([]);
  });

  it("sends the proxy URL's user info as Basic credentials", async () => {
    const { cp, p } = await throughProxy({ pin: false });
    const withUser = new URL(p.url);
    withUser.username = "agent";
    withUser.password = "s%40cret";
    const trust = new ControlPlaneTrust(pki.caPem, new ProxyRoutes({ httpsProxy: withUser.href }));
    expect(await (await trust.fetch(`${cp.url}/v1/x`)).json()).toEqual({ ok: true });
    expect(p.credentials).toEqual([`Basic ${Buffer.from("agent:s@cret").toString("base64")}`]);
  });

  it("a proxy that refuses the tunnel fails the request, naming the proxy and its answer", async () => {
    // Not pinned: nothing is fetched before the request.
    const { cp, p, trust } = await throughProxy({ pin: false });
    p.refuse = true;
    await expect(trust.fetch(`${cp.url}/v1/x`)).rejects.toThrow(
      `the proxy ${new URL(p.url).host} refused CONNECT ${cp.authority}: HTTP/1.1 407 Proxy Authentication Required`,
    );
    expect(p.connects).toEqual([cp.authority]);
  });

  it("the server's certificate is still checked inside the tunnel: a CA not pinned fails as a certificate error", async () => {
    const { cp, p, trust } = await throughProxy();
    const other = makePki(dir, "other");
    trust.ca = other.caPem;
    const refused = await trust.fetch(`${cp.url}/v1/x`).catch((err: unknown) => err);
    expect(isCertificateError(refused), String(refused)).toBe(true);
    expect(p.connects).toHaveLength(2);
  });
});
