import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "../sim/deps.ts";
import { registerFleet, type Simulator, startSimulator } from "../sim/index.ts";
import { api, type ServerProc, startServer, waitUntil } from "./support/processes.ts";

/**
 * The control plane at its open-file limit: the real server under `prlimit --nofile=256:256`
 * holds agent links only up to its ceiling (256 less a reserve of 64: 192), refuses more with
 * 503 and Retry-After before the upgrade, keeps answering its API, and takes the refused
 * agents once others leave.
 */
const OPEN_FILES = 256;
const CEILING = 192;
const EXTRA = 8;

let server: ServerProc;
let sim: Simulator | undefined;
let projectId: string;

beforeAll(async () => {
  server = await startServer({ wrap: ["prlimit", `--nofile=${OPEN_FILES}:${OPEN_FILES}`] });
  const projects = await api<{ projects: { id: string; name: string }[] }>(
    `${server.url}/v1/projects`,
    server.adminToken,
  );
  projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
});

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
});

/** Opens a link as an agent does; resolves with the socket, or the refusal's status and Retry-After. */
function link(credential: string): Promise<WebSocket | { status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/v1/agents/link`, {
      headers: { authorization: `Bearer ${credential}` },
    });
    ws.once("open", () => resolve(ws));
    ws.once("unexpected-response", (_req, res) => {
      const header = res.headers["retry-after"];
      resolve({ status: res.statusCode ?? 0, retryAfter: Array.isArray(header) ? header[0] : header });
      res.resume();
    });
    ws.once("error", reject);
  });
}

describe("agent links at the open-file limit", () => {
  it("holds links up to the ceiling below the limit, refuses the rest with 503 + Retry-After, and the API keeps answering", async () => {
    // Ten requests at a time: idle keep-alive API connections hold descriptors too, and the
    // reserve of 64 at this tiny limit is for the API, not for 50 idle registrations.
    sim = await startSimulator({
      url: server.url,
      count: CEILING,
      adminToken: server.adminToken,
      projectId,
      concurrency: 10,
    });
    expect(sim.connectedCount()).toBe(CEILING);

    const extra = await registerFleet(
      server.url,
      Array.from({ length: EXTRA }, (_, i) => `extra-${i}`),
      { adminToken: server.adminToken, projectId },
    );
    for (const { credential } of extra) {
      expect(await link(credential)).toEqual({ status: 503, retryAfter: "30" });
    }

    const ready = await api<{ status: string; agentLinks: { open: number; limit: number }; warnings: string[] }>(
      `${server.url}/readyz`,
      "",
    );
    expect(ready.status).toBe(200);
    expect(ready.body.agentLinks).toEqual({ open: CEILING, limit: CEILING });
    expect(ready.body.warnings).toHaveLength(1);
    // The operator still gets in: reads, a write, the OpenAPI document.
    expect((await api(`${server.url}/v4/${projectId}/nodes`, server.adminToken)).status).toBe(200);
    const created = await api(`${server.url}/v4/${projectId}/clusters`, server.adminToken, {
      method: "POST",
      body: { name: "at-the-limit" },
    });
    expect(created.status).toBe(200);
    expect((await fetch(`${server.url}/openapi.json`)).status).toBe(200);

    // Others leave: the refused agents get in.
    await Promise.all(sim.agents.slice(0, EXTRA).map((a) => a.stop()));
    await waitUntil(
      "links to drop below the ceiling",
      async () =>
        (await api<{ agentLinks: { open: number } }>(`${server.url}/readyz`, "")).body.agentLinks.open <=
        CEILING - EXTRA,
      10_000,
    );
    const admitted = await Promise.all(extra.map(({ credential }) => link(credential)));
    for (const ws of admitted) {
      expect(ws).toBeInstanceOf(WebSocket);
      (ws as WebSocket).close();
    }
  });
});
