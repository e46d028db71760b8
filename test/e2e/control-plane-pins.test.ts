import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keelson } from "../../packages/cli/test/run-cli.ts";
import { fakeAgentPackage } from "../../packages/control-plane/test/agent-package-fixtures.ts";
import { type AgentProc, startAgent } from "./support/agents.ts";
import { issueJoinToken } from "./support/join-tokens.ts";
import { api, freePort, type ServerProc, startServer, tempDir, trustedFetch, waitUntil } from "./support/processes.ts";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.ts";

/**
 * Moving the control plane to a new address (issue 11; spec §4.9 step 4, README "Upgrading the
 * hosts"): an agent reaches keelson-server (HTTPS, its own CA pinned by hash) at a made-up name,
 * cp.keelson.test, pinned to 127.0.0.1 by KEELSON_CONTROL_PLANE_ADDRESSES; no DNS knows the name,
 * so the pins alone make it work. A TCP forwarder on 127.0.0.2 (the same port) stands for the
 * control plane's new address. `keelson configure-hosts` with controlPlaneHosts pins the name to
 * 127.0.0.2: the agent checks it answers, links again through the forwarder (TLS still verified
 * against the name), keeps the pin across a restart, and refuses a pin to an address where
 * nothing listens, keeping the one it has.
 */

const ADMIN = "e2e-admin-token";
const NAME = "cp.keelson.test";
const HOST = "pin-host";

describe("control-plane pins set by configure-hosts", () => {
  let server: ServerProc;
  let forwarder: TcpProxy;
  let agent: AgentProc;
  let doFetch: typeof fetch;
  let projectId: string;
  let agentEnv: Record<string, string>;
  let controlPlane: string;
  const work = tempDir("keelson-e2e-pins-");
  const stateDir = tempDir("keelson-e2e-pins-agent-");
  const procs: { stop(signal?: NodeJS.Signals): Promise<unknown> }[] = [];

  const cliEnv = () => ({
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: work,
    KEELSON_URL: server.url,
    KEELSON_TOKEN: ADMIN,
    KEELSON_CA_FILE: join(server.dataDir, "tls", "ca.crt"),
    KEELSON_CONFIG: join(work, "cli.yaml"),
  });
  const configureHosts = (ip: string) => {
    const config = join(work, `hosts-${ip}.yaml`);
    writeFileSync(
      config,
      // JSON is YAML too.
      JSON.stringify({
        hostAgentRepo: "./keelson-agent.tar.gz",
        hosts: [HOST],
        controlPlaneHosts: [{ name: NAME, ip }],
      }),
    );
    return keelson(["configure-hosts", "--config", config], { env: cliEnv(), timeoutMs: 120_000 });
  };
  const connected = async () => {
    const res = await api<{ name: string; agentConnected: boolean }[]>(`${server.url}/v4/${projectId}/nodes`, ADMIN, {
      fetch: doFetch,
    });
    return res.body.find((n) => n.name === HOST)?.agentConnected === true;
  };
  const keptPins = () => JSON.parse(readFileSync(join(stateDir, "control-plane-pins.json"), "utf8")) as unknown;
  const startPinnedAgent = async (joinToken?: string) => {
    agent = await startAgent({
      name: HOST,
      controlPlane,
      stateDir,
      ...(joinToken ? { joinToken } : {}),
      env: agentEnv,
    });
    procs.push(agent);
  };

  beforeAll(async () => {
    const port = await freePort();
    server = await startServer({
      port,
      https: true,
      env: { KEELSON_TLS: "auto", KEELSON_TLS_SERVER_NAMES: NAME },
    });
    procs.push(server);
    doFetch = trustedFetch(server.dataDir);
    forwarder = await startTcpProxy({ host: "127.0.0.1", port }, { host: "127.0.0.2", port });
    procs.push({ stop: () => forwarder.close() });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN, {
      fetch: doFetch,
    });
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const issued = await issueJoinToken(server, projectId, doFetch);
    controlPlane = `https://${NAME}:${port}`;
    agentEnv = {
      KEELSON_CA_HASH: issued.caCertHash as string,
      KEELSON_CONTROL_PLANE_ADDRESSES: `${NAME}=127.0.0.1`,
    };
    writeFileSync(join(work, "keelson-agent.tar.gz"), fakeAgentPackage("0.0.1-pins"));
    await startPinnedAgent(issued.token);
    await waitUntil(`${HOST} linked at 127.0.0.1\n${agent.output()}`, connected, 60_000);
  }, 120_000);
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop("SIGKILL");
  });

  it("links through the forwarder once configure-hosts pinned the name to it, and after a restart", async () => {
    expect(forwarder.stats().forwarded).toBe(0);
    const run = await configureHosts("127.0.0.2");
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain(`${HOST}: control-plane addresses ${NAME}=127.0.0.2 (were ${NAME}=127.0.0.1)`);
    expect(keptPins()).toEqual({ pins: [{ name: NAME, ip: "127.0.0.2" }] });
    // The check's GET /readyz and then the new link, both through the forwarder.
    await waitUntil(
      `${HOST} linked through 127.0.0.2\n${agent.output()}`,
      async () => forwarder.stats().live >= 1 && (await connected()),
      30_000,
    );

    await agent.stop();
    const before = forwarder.stats().forwarded;
    await startPinnedAgent();
    await waitUntil(
      `${HOST} linked through 127.0.0.2 after its restart\n${agent.output()}`,
      async () => forwarder.stats().forwarded > before && forwarder.stats().live >= 1 && (await connected()),
      60_000,
    );
  });

  it("refuses a pin to an address where nothing listens, naming it, and keeps the pin it has", async () => {
    const before = forwarder.stats().forwarded;
    const run = await configureHosts("127.0.0.9");
    expect(run.code, `${run.stdout}\n${run.stderr}`).not.toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `${HOST}: control-plane addresses not set: .*${NAME.replaceAll(".", "\\.")} at 127\\.0\\.0\\.9 .*ECONNREFUSED`,
      ),
    );
    expect(run.stderr).toContain(`control-plane addresses not set on ${HOST}`);
    expect(keptPins()).toEqual({ pins: [{ name: NAME, ip: "127.0.0.2" }] });
    // Still linked through the forwarder, on the same connection: none new went through it.
    expect(await connected()).toBe(true);
    expect(forwarder.stats().forwarded).toBe(before);
    expect(forwarder.stats().live).toBeGreaterThanOrEqual(1);
  });
});
