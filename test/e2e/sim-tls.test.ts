import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfSignedCa } from "../../packages/control-plane/src/pki/cluster-ca.ts";
import { caCertHash } from "../../packages/protocol/src/ca-hash.ts";
import { type Simulator, startSimulator } from "../sim/index.ts";
import { api, type ServerProc, startServer, trustedFetch } from "./support/processes.ts";

/**
 * The simulated fleet over TLS, as `pnpm bench agents` runs it: pinned by KEELSON_CA_HASH it
 * links to keelson-server with KEELSON_TLS=auto, every link really TLS; a wrong hash is refused
 * before a join token is spent, a CA other than the server's is refused on the link, and an
 * http:// URL with a pin is refused: the bench's TLS rows cannot quietly be plain or unverified.
 */

let server: ServerProc;
let doFetch: typeof fetch;
let projectId: string;
let caPem: string;
const sims: Simulator[] = [];

interface JoinTokenAnswer {
  id: string;
  token: string;
  caCertHash: string | null;
}

async function joinToken(): Promise<JoinTokenAnswer> {
  const res = await api<JoinTokenAnswer>(`${server.url}/v1/projects/${projectId}/joinTokens`, server.adminToken, {
    method: "POST",
    body: { expiresInMinutes: 10 },
    fetch: doFetch,
  });
  expect(res.status).toBe(201);
  return res.body;
}

async function tokenUsed(id: string): Promise<boolean> {
  const listed = await api<{ joinTokens: { id: string; usedAt: string | null }[] }>(
    `${server.url}/v1/projects/${projectId}/joinTokens`,
    server.adminToken,
    { fetch: doFetch },
  );
  return listed.body.joinTokens.find((t) => t.id === id)?.usedAt !== null;
}

beforeAll(async () => {
  server = await startServer({ https: true, env: { KEELSON_TLS: "auto" } });
  doFetch = trustedFetch(server.dataDir);
  caPem = readFileSync(join(server.dataDir, "tls", "ca.crt"), "utf8");
  const projects = await api<{ projects: { id: string; name: string }[] }>(
    `${server.url}/v1/projects`,
    server.adminToken,
    { fetch: doFetch },
  );
  projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
});

afterAll(async () => {
  for (const sim of sims) await sim.stop();
  await server?.stop();
});

describe("simulated agents over TLS", () => {
  it("pinned by the join token's caCertHash, the fleet registers and links over TLS; the server holds every link", async () => {
    const tokens = [await joinToken(), await joinToken(), await joinToken()];
    const hash = tokens[0]?.caCertHash as string;
    expect(hash).toBe(caCertHash(caPem));
    const sim = await startSimulator({
      url: server.url,
      caHash: hash,
      count: 3,
      joinTokens: tokens.map((t) => t.token),
      namePrefix: "tls-sim",
    });
    sims.push(sim);
    expect(sim.connectedCount()).toBe(3);
    expect(sim.tlsCount()).toBe(3);
    for (const agent of sim.agents) expect(agent.tlsProtocol).toMatch(/^TLSv1\.[23]$/);
    // The control plane's side: three linked hosts answer a command over those links.
    const pinged = await api<{ hosts: number; ok: number }>(`${server.url}/v1/agents/ping`, server.adminToken, {
      method: "POST",
      body: { timeoutMs: 10_000 },
      fetch: doFetch,
    });
    expect(pinged.body).toMatchObject({ hosts: 3, ok: 3 });

    // Dropped links come back over TLS through the shared context.
    for (const agent of sim.agents) agent.kill();
    await expect.poll(() => sim.tlsCount(), { timeout: 20_000 }).toBe(3);
  });

  it("a wrong hash refuses before the join token is spent; the right hash then registers with it", async () => {
    const issued = await joinToken();
    const wrongHash = caCertHash((await createSelfSignedCa([{ CN: ["not-the-server-ca"] }])).certPem);
    await expect(
      startSimulator({
        url: server.url,
        caHash: wrongHash,
        count: 1,
        joinToken: issued.token,
        namePrefix: "tls-wrong",
      }),
    ).rejects.toThrow(`not KEELSON_CA_HASH ${wrongHash}`);
    expect(await tokenUsed(issued.id)).toBe(false);

    const sim = await startSimulator({
      url: server.url,
      caHash: issued.caCertHash as string,
      count: 1,
      joinToken: issued.token,
      namePrefix: "tls-right",
    });
    sims.push(sim);
    expect(sim.tlsCount()).toBe(1);
    expect(await tokenUsed(issued.id)).toBe(true);
  });

  it("registered agents trusting another CA refuse the server's certificate on the link", async () => {
    const issued = await joinToken();
    const registered = await startSimulator({
      url: server.url,
      ca: caPem,
      count: 1,
      joinToken: issued.token,
      namePrefix: "tls-other",
    });
    const identities = registered.identities;
    await registered.stop();
    const otherCa = (await createSelfSignedCa([{ CN: ["not-the-server-ca"] }])).certPem;
    await expect(
      startSimulator({
        url: server.url,
        ca: otherCa,
        count: 1,
        identities,
        namePrefix: "tls-other",
        connectTimeoutMs: 20_000,
      }),
    ).rejects.toThrow(/did not connect: TLS: .*(self-signed|unable to verify|issuer)/i);
  });

  it("a pin with an http:// URL is refused: a pinned fleet never speaks plain HTTP", async () => {
    await expect(
      startSimulator({
        url: server.url.replace(/^https:/, "http:"),
        caHash: caCertHash(caPem),
        count: 1,
        joinToken: "unused",
      }),
    ).rejects.toThrow(/is plain HTTP: give its https:\/\/ URL/);
  });
});
