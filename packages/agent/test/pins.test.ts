import { mkdtempSync, readFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { changePins } from "../src/link/pin-change.ts";
import { ControlPlanePins, PINS_FILE } from "../src/link/pins.ts";
import { ControlPlaneTrust } from "../src/link/trust.ts";
import { makePki } from "./pki-fixtures.ts";

/**
 * The agent's control-plane pins (issue 11): kept in the state dir over the setting's, used by
 * every connection the trust makes, and changed only when each new address answers /readyz as
 * the control plane with a certificate for the name. Names under .test never leave this machine:
 * only the pins resolve them.
 */

const NAME = "cp.keelson.test";
const dir = mkdtempSync(join(tmpdir(), "keelson-pins-"));
const pki = makePki(dir, "pins", `DNS:${NAME}`);
const impostorPki = makePki(dir, "impostor", "IP:127.0.0.1,IP:127.0.0.3");
const servers: (Server | HttpServer)[] = [];
let port = 0;
const asked: string[] = [];

const READY = JSON.stringify({ status: "ready", agentLinks: { open: 1, limit: null }, warnings: [], conditions: [] });

async function listen(server: Server | HttpServer, host: string, at: number): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(at, host, resolve));
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  // The control plane at 127.0.0.1 (its old address) and 127.0.0.2 (its new one), the same port.
  const cp = () =>
    createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
      asked.push(`${req.socket.localAddress} ${req.url}`);
      res.writeHead(200, { "content-type": "application/json" }).end(READY);
    });
  port = await listen(cp(), "127.0.0.1", 0);
  await listen(cp(), "127.0.0.2", port);
  // 127.0.0.3: a server whose certificate is not for the name; 127.0.0.4: something else answering 200.
  await listen(
    createServer({ key: impostorPki.key, cert: impostorPki.cert }, (_req, res) => res.writeHead(200).end(READY)),
    "127.0.0.3",
    port,
  );
  await listen(
    createServer({ key: pki.key, cert: pki.cert }, (_req, res) => res.writeHead(200).end("<html>hello</html>")),
    "127.0.0.4",
    port,
  );
  await listen(
    createHttpServer((_req, res) => res.writeHead(503).end('{"status":"draining"}')),
    "127.0.0.5",
    port,
  );
});
afterAll(async () => {
  for (const s of servers) await new Promise((r) => s.close(r));
});

const stateDir = () => mkdtempSync(join(tmpdir(), "keelson-pins-state-"));

describe("control-plane pins", () => {
  it("start from the setting, and the kept ones win over it after a restart", () => {
    const state = stateDir();
    const first = ControlPlanePins.in(state, [{ name: "CP.keelson.test", ip: "127.0.0.1" }]);
    expect(first.addressOf(NAME)).toBe("127.0.0.1");
    expect(first.addressOf("other.keelson.test")).toBeUndefined();
    first.replace([{ name: NAME, ip: "127.0.0.2" }]);
    expect(JSON.parse(readFileSync(join(state, PINS_FILE), "utf8"))).toEqual({
      pins: [{ name: NAME, ip: "127.0.0.2" }],
    });
    const restarted = ControlPlanePins.in(state, [{ name: NAME, ip: "127.0.0.1" }]);
    expect(restarted.list).toEqual([{ name: NAME, ip: "127.0.0.2" }]);
    restarted.replace([]);
    expect(ControlPlanePins.in(state, [{ name: NAME, ip: "127.0.0.1" }]).list).toEqual([]);
  });

  it("route every fetch of the trust to the pinned address, TLS verified against the name", async () => {
    const pins = ControlPlanePins.in(stateDir(), [{ name: NAME, ip: "127.0.0.2" }]);
    const trust = new ControlPlaneTrust(pki.caPem, undefined, pins);
    asked.length = 0;
    const res = await trust.fetch(`https://${NAME}:${port}/v1/ca`);
    expect(res.status).toBe(200);
    expect(asked).toEqual(["127.0.0.2 /v1/ca"]);
    expect(trust.connectOptions(`wss://${NAME}:${port}/v1/agents/link`).lookup).toBeTypeOf("function");
    expect(trust.connectOptions(`wss://other.keelson.test:${port}/v1/agents/link`).lookup).toBeUndefined();
  });

  it("change only when every new address answers /readyz as the control plane; else name it and keep the old", async () => {
    const state = stateDir();
    const pins = ControlPlanePins.in(state, [{ name: NAME, ip: "127.0.0.1" }]);
    // Both CAs trusted: the impostor's certificate chains, and is refused for its name alone.
    const trust = new ControlPlaneTrust(`${pki.caPem}${impostorPki.caPem}`, undefined, pins);
    const planes = [`https://${NAME}:${port}`];
    const change = (ip: string, name = NAME) => changePins(pins, trust, planes, { pins: [{ name, ip }] });

    const refusals: [string, RegExp][] = [
      [
        "127.0.0.9",
        new RegExp(`${NAME} at 127\\.0\\.0\\.9 \\(https://${NAME}:${port}\\): GET /readyz failed: .*ECONNREFUSED`),
      ],
      ["127.0.0.3", /cp\.keelson\.test at 127\.0\.0\.3 .*ERR_TLS_CERT_ALTNAME_INVALID: Hostname\/IP does not match/],
      ["127.0.0.4", /at 127\.0\.0\.4 .*answered 200 but not as a Keelson control plane/],
    ];
    for (const [ip, message] of refusals) {
      await expect(change(ip)).rejects.toThrow(message);
      expect(pins.list).toEqual([{ name: NAME, ip: "127.0.0.1" }]);
    }
    await expect(change("127.0.0.2", "other.keelson.test")).rejects.toThrow(
      "other.keelson.test is not a host name of KEELSON_CONTROL_PLANE (cp.keelson.test)",
    );

    asked.length = 0;
    expect(await change("127.0.0.2")).toEqual({
      pins: [{ name: NAME, ip: "127.0.0.2" }],
      previous: [{ name: NAME, ip: "127.0.0.1" }],
    });
    expect(asked).toEqual(["127.0.0.2 /readyz"]);
    expect(ControlPlanePins.in(state).list).toEqual([{ name: NAME, ip: "127.0.0.2" }]);
  });

  it("after a change, no request goes on over a connection kept alive to the old address", async () => {
    const pins = ControlPlanePins.in(stateDir(), [{ name: NAME, ip: "127.0.0.1" }]);
    const trust = new ControlPlaneTrust(pki.caPem, undefined, pins);
    const url = `https://${NAME}:${port}/v1/packages`;
    asked.length = 0;
    await (await trust.fetch(url)).text();
    await (await trust.fetch(url)).text();
    expect(asked).toEqual(["127.0.0.1 /v1/packages", "127.0.0.1 /v1/packages"]);
    // A download under way over the kept connection while the pins change: it ends there, and
    // that connection is not used again.
    const during = await trust.fetch(url);
    await changePins(pins, trust, [`https://${NAME}:${port}`], { pins: [{ name: NAME, ip: "127.0.0.2" }] });
    await during.text();
    asked.length = 0;
    await (await trust.fetch(url)).text();
    await (await trust.fetch(url)).text();
    expect(asked).toEqual(["127.0.0.2 /v1/packages", "127.0.0.2 /v1/packages"]);
  });

  it("over plain HTTP, a control plane that is not ready is refused with its answer", async () => {
    const pins = ControlPlanePins.in(stateDir());
    const trust = new ControlPlaneTrust(undefined, undefined, pins);
    await expect(
      changePins(pins, trust, [`http://${NAME}:${port}`], { pins: [{ name: NAME, ip: "127.0.0.5" }] }),
    ).rejects.toThrow(/cp\.keelson\.test at 127\.0\.0\.5 .*GET \/readyz answered HTTP 503 \{"status":"draining"\}/);
    expect(pins.list).toEqual([]);
  });
});
