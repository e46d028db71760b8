import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { agentInstallCommand } from "../src/domain/install/agent-install.ts";
import { defaultServerSettings } from "../src/settings.ts";
import { prepareServerTls } from "../src/tls/server-tls.ts";
import { fakeAgentPackage, sha256, uploadAgentPackage } from "./agent-package-fixtures.ts";
import { ADMIN_TOKEN, createTestApp } from "./helpers.ts";

/**
 * GET /v1/install/agent.sh and the join token's installCommand (README, "Adding a host"). The
 * script and the command are checked by shellcheck (scripts/ensure-system-deps.sh installs it)
 * as POSIX sh; test/e2e/install-agent.test.ts runs them against a real server.
 */
const dir = mkdtempSync(join(tmpdir(), "keelson-install-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function shellcheck(text: string, name: string): void {
  const file = join(dir, name);
  writeFileSync(file, text);
  const result = spawnSync("shellcheck", ["--shell=sh", "--severity=style", file], { encoding: "utf8" });
  expect(result.error).toBeUndefined();
  expect(result.stdout).toBe("");
  expect(result.status).toBe(0);
}

const upload = uploadAgentPackage;

describe("GET /v1/install/agent.sh", () => {
  it("is public, names the package stored last (or the one asked for) and holds no credential", async () => {
    const t = await createTestApp({ settings: { publicUrl: "http://127.0.0.1:9999" } });
    try {
      const none = await t.request({ method: "GET", url: "/v1/install/agent.sh", token: null });
      expect(none.statusCode).toBe(404);
      expect(none.json()).toMatchObject({
        code: "not_found",
        message: expect.stringContaining("POST /v1/agentPackages"),
      });

      const first = fakeAgentPackage("1.0.0");
      const second = fakeAgentPackage("1.1.0");
      expect((await upload(t, first)).statusCode).toBe(200);
      await new Promise((done) => setTimeout(done, 20)); // distinct stored times, the order "last" goes by
      expect((await upload(t, second)).statusCode).toBe(200);

      const res = await t.request({ method: "GET", url: "/v1/install/agent.sh", token: null });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/text\/x-shellscript/);
      expect(res.body).toMatch(/^#!\/bin\/sh\n/);
      expect(res.body).toContain("CONTROL_PLANE='http://127.0.0.1:9999'\n");
      expect(res.body).toContain("AGENT_VERSION='1.1.0'\n");
      expect(res.body).toContain(`AGENT_SHA256='${sha256(second)}'\n`);
      expect(res.body).not.toContain("@@");
      expect(res.body).not.toContain(ADMIN_TOKEN);
      shellcheck(res.body, "agent.sh");

      // Refusals that need no network: plain HTTP beyond loopback, HTTPS without a pin.
      const script = join(dir, "served.sh");
      writeFileSync(script, res.body);
      const run = (...args: string[]) =>
        spawnSync("sh", [script, "--root", join(dir, "root"), ...args], {
          encoding: "utf8",
          env: { PATH: process.env.PATH },
        });
      const plain = run("--control-plane", "http://192.0.2.1:8080");
      expect(plain.status).toBe(1);
      expect(plain.stderr).toContain("refusing plain HTTP to 192.0.2.1: only a control plane on loopback");
      const unpinned = run("--control-plane", "https://192.0.2.1:8443");
      expect(unpinned.status).toBe(1);
      expect(unpinned.stderr).toContain("--ca-hash sha256:<hex> is required");
      expect(run("--bogus").status).toBe(2);

      const older = await t.request({ method: "GET", url: "/v1/install/agent.sh?version=1.0.0", token: null });
      expect(older.body).toContain(`AGENT_SHA256='${sha256(first)}'\n`);
      const missing = await t.request({ method: "GET", url: "/v1/install/agent.sh?version=9.9.9", token: null });
      expect(missing.statusCode).toBe(404);
      const bad = await t.request({ method: "GET", url: "/v1/install/agent.sh?version=../x", token: null });
      expect(bad.statusCode).toBe(400);
      expect(bad.json()).toMatchObject({ code: expect.any(String), message: expect.stringContaining("version") });
    } finally {
      await t.close();
    }
  });
});

describe("the join token's installCommand", () => {
  it("over TLS: pins the CA by its hash before fetching the script with it as the only trust", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-install-tls-"));
    const settings = defaultServerSettings({ dataDir, tlsMode: "auto", publicUrl: "https://cp.test.internal:8443" });
    const tls = await prepareServerTls(settings);
    const t = await createTestApp({ dataDir, settings, ...(tls ? { tls } : {}) });
    try {
      const issued = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
      const body = issued.json<{ token: string; caCertHash: string; installCommand: string }>();
      const command = body.installCommand;
      expect(command).toContain(`cp='https://cp.test.internal:8443'`);
      expect(command).toContain(`pin='${body.caCertHash}'`);
      expect(command).toContain(`KEELSON_JOIN_TOKEN='${body.token}'`);
      // Only the CA bundle is fetched unverified; the script with the pinned CA.
      expect(command.match(/curl -fsSk/g)).toHaveLength(1);
      expect(command).toContain(`curl -fsSk "$cp/v1/ca"`);
      expect(command).toContain(`curl -fsS --cacert "$d/ca.pem" "$cp/v1/install/agent.sh"`);
      // The hash check comes before the script is fetched, and the token only after both.
      expect(command.indexOf("openssl dgst")).toBeLessThan(command.indexOf("/v1/install/agent.sh"));
      expect(command.indexOf("KEELSON_JOIN_TOKEN")).toBeGreaterThan(command.indexOf("/v1/install/agent.sh"));
      shellcheck(`#!/bin/sh\n${command}\n`, "command.sh");
    } finally {
      await t.close();
    }
  });

  it("plain HTTP: a command for a loopback control plane only", async () => {
    const t = await createTestApp();
    try {
      const issued = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
      const body = issued.json<{ token: string; installCommand: string | null }>();
      // light-my-request answers as host localhost:80
      expect(body.installCommand).toContain("curl -fsS 'http://localhost:80/v1/install/agent.sh'");
      // Only curl's own flags: the random token may itself contain "-k".
      expect(body.installCommand).not.toMatch(/curl -\w*k/);
      expect(body.installCommand).not.toContain("--insecure");
      shellcheck(`#!/bin/sh\n${body.installCommand}\n`, "plain.sh");
    } finally {
      await t.close();
    }
    expect(agentInstallCommand("http://10.0.0.5:8080", null, "t")).toBeNull();
    expect(agentInstallCommand("http://[::1]:8080", null, "t")).toContain("http://[::1]:8080/v1/install/agent.sh");
    expect(agentInstallCommand("https://cp:8443", null, "t")).toBeNull();
    // A token with a quote in it cannot break out of its quoting.
    const odd = agentInstallCommand("http://127.0.0.1:1", null, "a'b") as string;
    const assignment = odd.slice(odd.indexOf("KEELSON_JOIN_TOKEN="), odd.lastIndexOf(" sh "));
    expect(execFileSync("sh", ["-c", `${assignment}; printf %s "$KEELSON_JOIN_TOKEN"`]).toString()).toBe("a'b");
  });
});
