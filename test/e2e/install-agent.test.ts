import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfSignedCa } from "../../packages/control-plane/src/pki/cluster-ca.ts";
import { caCertHash } from "../../packages/protocol/src/ca-hash.ts";
import { packAgent } from "../../scripts/pack-agent.ts";
import { startConnectProxy } from "../support/connect-proxy.ts";
import { issueJoinToken, type JoinTokenAnswer, joinTokenUsedAt } from "./support/join-tokens.ts";
import { api, freePort, type ServerProc, startServer, tempDir, trustedFetch, waitUntil } from "./support/processes.ts";

/**
 * The agent installed the README's way ("Adding a host"): the join token's installCommand, run
 * by sh against a real keelson-server with KEELSON_TLS=auto on loopback, with the install root
 * in a temporary directory and no systemd. It installs the packed agent, starts the launcher,
 * which registers with the join token; a second run changes nothing; a wrong CA hash is refused
 * before the script is even fetched, and the token stays unspent. A run with HTTPS_PROXY (as an
 * auto deploy's user data exports the cluster's httpProxy) writes it into agent.env, and the
 * restarted agent links through that proxy (a CONNECT proxy in the test, counting its tunnels).
 */

const ADMIN = "e2e-admin-token";
const VERSION = "0.9.0-install";

/** Over TLS both are set. */
type Issued = JoinTokenAnswer & { caCertHash: string; installCommand: string };

/** Runs `command` with sh, as a person pasting it would, with the environment given on top. */
function runSh(command: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((done, fail) => {
    const child = spawn("sh", ["-c", command], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.once("error", fail);
    child.once("close", (code) => {
      clearTimeout(timer);
      done({ code, out });
    });
  });
}

describe("the agent install command under a temporary root", () => {
  let server: ServerProc;
  let projectId: string;
  let doFetch: typeof fetch;
  const root = tempDir("keelson-e2e-install-root-");
  const pidFile = join(root, "run", "keelson-agent.pid");
  let agentEnv: Record<string, string>;

  const joinToken = async () => (await issueJoinToken(server, projectId, doFetch)) as Issued;
  const usedAt = (id: string) => joinTokenUsedAt(server, projectId, id, doFetch);
  const nodesNamed = async (name: string) => {
    const res = await api<{ name: string; uuid: string; agentConnected: boolean }[]>(
      `${server.url}/v4/${projectId}/nodes`,
      ADMIN,
      { fetch: doFetch },
    );
    return res.body.filter((n) => n.name === name);
  };

  beforeAll(async () => {
    server = await startServer({ https: true, env: { KEELSON_TLS: "auto" } });
    doFetch = trustedFetch(server.dataDir);
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN, {
      fetch: doFetch,
    });
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const pkg = await packAgent({ version: VERSION, out: tempDir("keelson-e2e-install-pkg-") });
    const stored = await api(`${server.url}/v1/agentPackages/import`, ADMIN, {
      method: "POST",
      body: { path: pkg.file },
      fetch: doFetch,
    });
    expect(stored.status).toBe(200);
    agentEnv = {
      KEELSON_INSTALL_ROOT: root,
      // What the launcher inherits besides agent.env: its own listener and name on this shared machine.
      KEELSON_AGENT_LISTEN: `127.0.0.1:${await freePort()}`,
      KEELSON_HOSTNAME: "installed-host",
      KEELSON_AGENT_RECONNECT_INITIAL_MS: "100",
      KEELSON_AGENT_RECONNECT_MAX_MS: "1000",
    };
  }, 120_000);

  afterAll(async () => {
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, "utf8"));
      // The launcher leads its own session (setsid): its group holds the agent too.
      try {
        process.kill(-pid, "SIGTERM");
        await waitUntil("the installed agent stopped", async () => {
          try {
            process.kill(pid, 0);
            return false;
          } catch {
            return true;
          }
        });
      } catch {
        // already gone
      }
    }
    await server?.stop("SIGKILL");
  });

  it("a wrong CA hash is refused before the script is fetched; nothing is installed and the token stays unspent", async () => {
    const issued = await joinToken();
    const wrongHash = caCertHash((await createSelfSignedCa([{ CN: ["other"] }])).certPem);
    const forged = issued.installCommand.replace(issued.caCertHash, wrongHash);
    expect(forged).not.toBe(issued.installCommand);
    const run = await runSh(forged, agentEnv);
    expect(run.code).toBe(1);
    expect(run.out).toContain(`does not have the hash ${wrongHash}: not installing`);
    expect(existsSync(join(root, "opt"))).toBe(false);

    // The script itself checks the same, for anyone who runs it by hand with a wrong hash.
    const script = await (await doFetch(`${server.url}/v1/install/agent.sh`)).text();
    const scriptDir = tempDir("keelson-e2e-install-script-");
    writeFileSync(join(scriptDir, "agent.sh"), script);
    const byHand = await runSh(`sh "${join(scriptDir, "agent.sh")}" --ca-hash ${wrongHash}`, {
      ...agentEnv,
      KEELSON_JOIN_TOKEN: issued.token,
    });
    expect(byHand.code).toBe(1);
    expect(byHand.out).toContain(`no CA certificate of ${server.url} has the pinned hash ${wrongHash}`);
    expect(existsSync(join(root, "opt"))).toBe(false);
    expect(await usedAt(issued.id)).toBeNull();
  }, 60_000);

  it("installs the agent, which registers with the join token; a second run changes nothing", async () => {
    const issued = await joinToken();
    const first = await runSh(issued.installCommand, agentEnv);
    expect(first.out).toContain("systemd: no");
    expect(first.code, first.out).toBe(0);
    expect(first.out).toContain(`the control plane's CA matches ${issued.caCertHash}`);
    expect(first.out).toContain("systemd is not running here");

    const agentDir = join(root, "opt", "keelson", "agent");
    expect(readlinkSync(join(agentDir, "current"))).toBe(VERSION);
    for (const file of ["manifest.json", "agent.mjs", "launcher.mjs", "keelson-agent.service"]) {
      expect(existsSync(join(agentDir, VERSION, file))).toBe(true);
    }
    const envFile = join(root, "etc", "keelson", "agent.env");
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(envFile, "utf8")).toBe(
      `KEELSON_CONTROL_PLANE=${server.url}\nKEELSON_CA_HASH=${issued.caCertHash}\nKEELSON_JOIN_TOKEN=${issued.token}\n`,
    );
    expect(readFileSync(join(root, "etc", "systemd", "system", "keelson-agent.service"), "utf8")).toBe(
      readFileSync(join(agentDir, VERSION, "keelson-agent.service"), "utf8"),
    );

    // Registered with the token, linked, and the CA kept in its state dir.
    await waitUntil("the installed agent linked", async () => (await nodesNamed("installed-host"))[0]?.agentConnected);
    expect(await usedAt(issued.id)).not.toBeNull();
    const stateDir = join(root, "var", "lib", "keelson-agent");
    expect(readFileSync(join(stateDir, "control-plane-ca.pem"), "utf8").trim()).toBe(
      readFileSync(join(server.dataDir, "tls", "ca.crt"), "utf8").trim(),
    );
    const pid = readFileSync(pidFile, "utf8").trim();
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).toContain(join(agentDir, "current", "launcher.mjs"));

    const second = await runSh(issued.installCommand, agentEnv);
    expect(second.code, second.out).toBe(0);
    expect(second.out).toContain(`agent ${VERSION} is installed already`);
    expect(second.out).toContain("agent.env is up to date");
    expect(second.out).toContain(`the agent is running (pid ${pid}); nothing changed`);
    expect(readFileSync(pidFile, "utf8").trim()).toBe(pid);
    const nodes = await nodesNamed("installed-host");
    expect(nodes).toHaveLength(1);
    expect(nodes[0]?.agentConnected).toBe(true);
  }, 120_000);

  it("a proxy in the install's environment reaches the agent: agent.env carries it and the agent links through it", async () => {
    const proxy = await startConnectProxy();
    try {
      const issued = await joinToken();
      const envFile = join(root, "etc", "keelson", "agent.env");
      const oldPid = readFileSync(pidFile, "utf8").trim();
      // As an auto deploy's user data exports the cluster's httpProxy (curl reads the lower-case names too).
      const run = await runSh(issued.installCommand, { ...agentEnv, HTTPS_PROXY: proxy.url, https_proxy: proxy.url });
      expect(run.code, run.out).toBe(0);
      // The script's own downloads went through it (curl), then the settings changed: the agent restarted.
      const byScript = proxy.connects.length;
      expect(byScript).toBeGreaterThan(0);
      expect(run.out).toContain(`stopping the agent (pid ${oldPid}) to start what changed`);
      expect(readFileSync(envFile, "utf8")).toBe(
        `KEELSON_CONTROL_PLANE=${server.url}\nKEELSON_CA_HASH=${issued.caCertHash}\nKEELSON_JOIN_TOKEN=${issued.token}\n` +
          `HTTPS_PROXY='${proxy.url}'\n`,
      );
      // systemd reads the file as the bare value: its own env-file parser, as its environment.d generator runs it.
      if (existsSync(ENV_GENERATOR)) {
        const config = tempDir("keelson-e2e-envd-");
        mkdirSync(join(config, "environment.d"));
        copyFileSync(envFile, join(config, "environment.d", "10-agent.conf"));
        const parsed = execFileSync(ENV_GENERATOR, { env: { XDG_CONFIG_HOME: config }, encoding: "utf8" });
        expect(parsed.split("\n")).toContain(`HTTPS_PROXY=${proxy.url}`);
      }
      // So does sh: the launcher started by the script has it in its environment.
      const pid = readFileSync(pidFile, "utf8").trim();
      expect(pid).not.toBe(oldPid);
      expect(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")).toContain(`HTTPS_PROXY=${proxy.url}`);

      // The restarted agent links to the control plane through the proxy: a tunnel to it stays open.
      const authority = new URL(server.url).host;
      await waitUntil("the agent's link through the proxy", async () => proxy.open() >= 1);
      expect(proxy.connects.slice(byScript).every((c) => c === authority)).toBe(true);
      await waitUntil(
        "the installed agent linked",
        async () => (await nodesNamed("installed-host"))[0]?.agentConnected,
      );
      expect(proxy.open()).toBeGreaterThanOrEqual(1);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});

/** systemd's environment.d generator: the same env-file parser EnvironmentFile= uses (src/basic/env-file.c). */
const ENV_GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator";
