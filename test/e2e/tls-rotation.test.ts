import { readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { caCertHash, splitPemCertificates } from "../../packages/protocol/src/ca-hash.ts";
import { type AgentProc, startAgent } from "./support/agents.ts";
import {
  api,
  logRecords,
  type Proc,
  type ServerProc,
  startServer,
  trustedFetch,
  waitUntil,
} from "./support/processes.ts";

/**
 * The README's CA rotation, step by step with a real server and a pinned agent: the next CA is
 * served beside the current one, the agent takes it over its verified link, the next CA is
 * promoted (the server certificate re-issued under it) and the agent links on, across its own
 * restart with the old pin; once the previous CA is dropped, the new pin is what counts.
 */

const ADMIN = "e2e-admin-token";

describe("rotating the control plane's CA", () => {
  const procs: Proc[] = [];
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop("SIGKILL");
  });

  it("keeps a pinned agent linked through stage, promote and drop", async () => {
    let server: ServerProc = await startServer({ https: true, env: { KEELSON_TLS: "auto" } });
    procs.push(server);
    const { dataDir } = server;
    const port = Number(new URL(server.url).port);
    const tlsDir = join(dataDir, "tls");
    const restart = async (env: Record<string, string> = {}) => {
      expect(await server.stop("SIGTERM")).toBe(0);
      server = await startServer({ https: true, dataDir, port, env: { KEELSON_TLS: "auto", ...env } });
      procs.push(server);
    };
    const call = <T>(path: string, init: { method?: string; body?: unknown } = {}) =>
      api<T>(`${server.url}${path}`, ADMIN, { ...init, fetch: trustedFetch(dataDir) });
    const projects = await call<{ projects: { id: string; name: string }[] }>("/v1/projects");
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const issued = await call<{ token: string; caCertHash: string }>(`/v1/projects/${projectId}/joinTokens`, {
      method: "POST",
      body: {},
    });
    const oldHash = issued.body.caCertHash;
    const linked = async () => {
      const nodes = await call<{ name: string; agentConnected: boolean }[]>(`/v4/${projectId}/nodes`);
      return nodes.body.find((n) => n.name === "rotating")?.agentConnected;
    };
    const trusted = (agent: AgentProc) =>
      splitPemCertificates(readFileSync(join(agent.stateDir, "control-plane-ca.pem"), "utf8")).map(caCertHash);

    let agent = await startAgent({
      name: "rotating",
      controlPlane: server.url,
      joinToken: issued.body.token,
      env: { KEELSON_CA_HASH: oldHash },
    });
    procs.push(agent);
    await waitUntil("the agent linked", linked, 60_000);
    expect(trusted(agent)).toEqual([oldHash]);

    // 1. Stage: the next CA is served beside the current one, which still signs.
    await restart({ KEELSON_TLS_NEXT_CA: "true" });
    const newHash = caCertHash(readFileSync(join(tlsDir, "next", "ca.crt"), "utf8"));
    await waitUntil("the agent trusts both CAs", async () => trusted(agent).length === 2, 30_000);
    expect(trusted(agent)).toEqual([oldHash, newHash]);
    await waitUntil("the agent linked again", linked, 30_000);

    // 2. Promote (server stopped): the next CA becomes the CA, the old one is kept as previous.
    expect(await server.stop("SIGTERM")).toBe(0);
    renameSync(join(tlsDir, "ca.crt"), join(tlsDir, "previous-ca.crt"));
    renameSync(join(tlsDir, "next", "ca.crt"), join(tlsDir, "ca.crt"));
    renameSync(join(tlsDir, "next", "ca.key"), join(tlsDir, "ca.key"));
    rmSync(join(tlsDir, "next"), { recursive: true });
    server = await startServer({ https: true, dataDir, port, env: { KEELSON_TLS: "auto" } });
    procs.push(server);
    await waitUntil("the agent linked under the new CA", linked, 30_000);
    const promoted = await call<{ caCertHash: string }>(`/v1/projects/${projectId}/joinTokens`, {
      method: "POST",
      body: {},
    });
    expect(promoted.body.caCertHash).toBe(newHash);
    // The agent's restart with its old pin: the kept bundle still names it.
    await agent.stop("SIGTERM");
    agent = await startAgent({
      name: "rotating",
      controlPlane: server.url,
      stateDir: agent.stateDir,
      env: { KEELSON_CA_HASH: oldHash },
    });
    procs.push(agent);
    await waitUntil("the agent linked after its restart", linked, 60_000);

    // 3. Drop the previous CA: the agent follows, and from now on the new pin is the one.
    rmSync(join(tlsDir, "previous-ca.crt"));
    await restart();
    await waitUntil("the agent trusts the new CA alone", async () => trusted(agent).join() === newHash, 30_000);
    await agent.stop("SIGTERM");
    agent = await startAgent({
      name: "rotating",
      controlPlane: server.url,
      stateDir: agent.stateDir,
      env: { KEELSON_CA_HASH: newHash },
    });
    procs.push(agent);
    await waitUntil("the agent linked with the new pin", linked, 60_000);
    expect(logRecords(agent).filter((r) => r.level === 60)).toEqual([]);
  });
});
