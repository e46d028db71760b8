import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caCertHash } from "@keelson/protocol";
import { afterEach, describe, expect, it } from "vitest";
import {
  ControlPlaneTrust,
  establishTrust,
  isCertificateError,
  TRUSTED_CA_FILE,
  TrustError,
} from "../src/link/trust.ts";
import { makePki } from "./pki-fixtures.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** An HTTPS control plane stand-in on loopback: /v1/ca answers `bundle`; every path asked is noted. */
async function serve(pki: { key: string; cert: string }, bundle: string) {
  const paths: string[] = [];
  const server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    paths.push(req.url ?? "");
    if (req.url === "/v1/ca") res.writeHead(200, { "content-type": "application/x-pem-file" }).end(bundle);
    else res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, paths };
}

describe("the agent's trust of the control plane", () => {
  const dir = mkdtempSync(join(tmpdir(), "keelson-trust-"));
  const real = makePki(dir, "real");
  const other = makePki(dir, "other");
  const realHash = caCertHash(real.caPem);

  it("accepts the CA whose hash is pinned, keeps only it, and verifies the server against it alone", async () => {
    // The bundle also carries a CA nobody pinned: it must not become trusted with the other.
    const cp = await serve(real, `${real.caPem}${other.caPem}`);
    const stateDir = mkdtempSync(join(tmpdir(), "keelson-trust-state-"));
    const trust = await establishTrust({ controlPlane: cp.url, caHash: realHash, stateDir });
    expect(trust.ca?.trim()).toBe(real.caPem.trim());
    expect(readFileSync(join(stateDir, TRUSTED_CA_FILE), "utf8").trim()).toBe(real.caPem.trim());
    const answer = await trust.fetch(`${cp.url}/v1/agents/register`, { method: "POST", body: "{}" });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ ok: true });

    // A server with a certificate of the other CA is refused by the same trust.
    const impostor = await serve(other, other.caPem);
    const refused = await trust.fetch(`${impostor.url}/v1/agents/register`).catch((err: unknown) => err);
    expect(isCertificateError(refused)).toBe(true);
    expect(impostor.paths).toEqual([]);

    // A restart uses the kept CA without asking the server again.
    cp.paths.length = 0;
    const again = await establishTrust({ controlPlane: cp.url, caHash: realHash, stateDir });
    expect(again.ca?.trim()).toBe(real.caPem.trim());
    expect(cp.paths).toEqual([]);
  });

  it("refuses a CA bundle without the pinned hash before anything else is asked", async () => {
    const impostor = await serve(other, other.caPem);
    const stateDir = mkdtempSync(join(tmpdir(), "keelson-trust-state-"));
    const attempt = establishTrust({ controlPlane: impostor.url, caHash: realHash, stateDir });
    await expect(attempt).rejects.toThrow(TrustError);
    await expect(attempt).rejects.toThrow(`not KEELSON_CA_HASH ${realHash}`);
    expect(impostor.paths).toEqual(["/v1/ca"]);
  });

  it("fetches again when the kept CA no longer matches the hash (a new pin), and refuses a hash on plain HTTP", async () => {
    const cp = await serve(real, real.caPem);
    const stateDir = mkdtempSync(join(tmpdir(), "keelson-trust-state-"));
    writeFileSync(join(stateDir, TRUSTED_CA_FILE), other.caPem);
    const trust = await establishTrust({ controlPlane: cp.url, caHash: realHash, stateDir });
    expect(trust.ca?.trim()).toBe(real.caPem.trim());
    expect(cp.paths).toEqual(["/v1/ca"]);
    await expect(establishTrust({ controlPlane: "http://127.0.0.1:1", caHash: realHash, stateDir })).rejects.toThrow(
      /plain HTTP/,
    );
    expect(new ControlPlaneTrust(undefined).connectOptions("https://10.0.0.5:8443")).toEqual({});
  });
});
