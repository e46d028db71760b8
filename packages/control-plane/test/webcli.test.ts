import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWebCliKey } from "../src/domain/webcli/key.ts";
import { issueWebCliToken } from "../src/domain/webcli/tokens.ts";
import { splitCommandLine } from "../src/webcli/argv.ts";
import { decide } from "../src/webcli/policy.ts";
import { WebCliServer } from "../src/webcli/server.ts";
import { EXIT } from "../src/webcli/session.ts";
import { createTestApp, type TestApp } from "./helpers.ts";
import { Client, openSession } from "./webcli-client.ts";

/**
 * The web CLI's server side over a real WebSocket with the real kubectl (/usr/bin/kubectl):
 * `kubectl version --client` needs no API server, so this file checks the session's mechanics
 * and refusals; test/e2e/kubectl.test.ts runs `kubectl get nodes` in a session against a
 * cluster Keelson built.
 */

let t: TestApp;
let url: string;
let clusterId: string;
let otherClusterId: string;

const tokenFor = (cluster: string, options: { now?: Date; ttlSeconds?: number } = {}) =>
  issueWebCliToken(loadWebCliKey(t.dataDir), {
    projectId: t.projectId,
    clusterId: cluster,
    subject: "admin",
    ...options,
  }).token;

const session = (token: string, query = ""): Promise<Client> => openSession(`${url}${query}`, token);

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v1/webcli/session`;
  const create = async (name: string) => {
    const res = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/clusters`,
      payload: { name, externalDnsName: `${name}.webcli.test` },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().uuid as string;
  };
  clusterId = await create("webcli-one");
  otherClusterId = await create("webcli-two");
});
afterAll(() => t.close());

describe("a web CLI session", () => {
  it("opens with its token, runs the real kubectl, refuses what it must, and removes its directory at close", async () => {
    const before = new Set(readdirSync(tmpdir()).filter((d) => d.startsWith("keelson-webcli-")));
    const client = await session(tokenFor(clusterId), `?cluster=${clusterId}`);
    expect(await client.next("ready")).toEqual({ type: "ready", cluster: clusterId });
    const dirs = readdirSync(tmpdir()).filter((d) => d.startsWith("keelson-webcli-") && !before.has(d));
    expect(dirs).toHaveLength(1);

    const version = await client.run("kubectl version --client");
    expect(version).toMatchObject({ code: 0, stderr: "" });
    expect(version.stdout).toMatch(/^Client Version: v1\./m);
    // The session's kubeconfig names its cluster's API server, and kubectl reads it from KUBECONFIG.
    const server = await client.run("kubectl cluster-info --request-timeout=1s");
    expect(server.stdout + server.stderr).toContain("webcli-one.webcli.test");

    const refused = async (line: string, message: RegExp) => {
      const res = await client.run(line);
      expect(res, line).toMatchObject({ code: 126, stdout: "" });
      expect(res.stderr, line).toMatch(message);
    };
    await refused("sh -c id", /^sh: not available; a web CLI session runs kubectl only/);
    await refused(
      "kubectl --kubeconfig=/etc/kubernetes/admin.conf get nodes",
      /--kubeconfig: not available.*kubeconfig is fixed/,
    );
    await refused("kubectl plugin list", /kubectl plugin: not available.*runs programs/);
    await refused(
      "kubectl get pods | grep x",
      /pipes are not available: the web CLI runs kubectl directly, without a shell/,
    );
    await refused("kubectl get pods > /tmp/out", /redirections are not available/);
    await refused("kubectl get nodes $(id)", /command substitution/);
    await refused("kubectl apply -f /etc/passwd", /-f: \/etc\/passwd is outside the session's directory/);
    await refused("kubectl exec -it pod -- sh", /kubectl exec: not available/);
    await refused("kubectl -s https://elsewhere.test get nodes", /-s: not available/);
    await refused("kubectl config view --raw", /kubectl config: not available/);
    const help = await client.run("help");
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toMatch(/runs kubectl/);

    client.send({ type: "input", data: "exit" });
    expect((await client.closed).code).toBe(1000);
    await expect.poll(() => existsSync(`${tmpdir()}/${dirs[0]}`)).toBe(false);
  });

  it("refuses an expired token, another cluster's token, a replayed token and a bad first frame", async () => {
    const expect_error = async (client: Client, code: string) => {
      const frame = await client.next("ready");
      expect(frame).toMatchObject({ type: "error", code });
      expect(String(frame.message).length).toBeGreaterThan(10);
      await client.closed;
    };
    const expired = tokenFor(clusterId, { now: new Date(Date.now() - 700_000) });
    await expect_error(await session(expired), "invalid_token");
    await expect_error(await session(tokenFor(otherClusterId), `?cluster=${clusterId}`), "wrong_cluster");
    await expect_error(await session(`${tokenFor(clusterId)}x`), "invalid_token");
    // An X-Auth-Token is not a web CLI token.
    await expect_error(await session(t.token), "invalid_token");

    const once = tokenFor(clusterId);
    const first = await session(once);
    expect(await first.next("ready")).toMatchObject({ type: "ready", cluster: clusterId });
    first.close();
    await first.closed;
    await expect_error(await session(once), "token_used");

    const wrongFirst = new Client(url);
    await wrongFirst.opened();
    wrongFirst.send({ type: "input", data: "kubectl get nodes" });
    await expect_error(wrongFirst, "bad_frame");
    const extraField = new Client(url);
    await extraField.opened();
    extraField.send({ type: "auth", token: once, cluster: clusterId });
    await expect_error(extraField, "bad_frame");
    const notJson = new Client(url);
    await notJson.opened();
    notJson.send("kubectl get nodes");
    await expect_error(notJson, "bad_frame");
  });
});

describe("the web CLI's limits", () => {
  it("ends a connection that sends no auth frame within the auth deadline", async () => {
    // The app's own server waits AUTH_TIMEOUT_MS (10 s); this one, on the same app, 300 ms.
    const webcli = new WebCliServer(t.app.keelson, { authTimeoutMs: 300 });
    const http = createServer();
    http.on("upgrade", webcli.onUpgrade);
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    try {
      const client = new Client(`ws://127.0.0.1:${(http.address() as AddressInfo).port}/v1/webcli/session`);
      await client.opened();
      const started = Date.now();
      expect(await client.next("ready", 0, 5_000)).toEqual({
        type: "error",
        code: "auth_timeout",
        message: "no auth frame within 300 ms",
      });
      expect((await client.closed).code).toBe(1000);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    } finally {
      await webcli.close();
      await new Promise((resolve) => http.close(resolve));
    }
  });

  it("kills a command past the per-command time limit with exit 124 and says so", async () => {
    // A kubectl that never answers: the time limit is the session's, whatever it runs.
    const dir = mkdtempSync(join(tmpdir(), "keelson-webcli-slow-"));
    const slow = join(dir, "kubectl");
    writeFileSync(slow, `#!/bin/sh\necho $$ > ${dir}/pid\nexec /bin/sleep 30\n`, { mode: 0o755 });
    const saved = { kubectl: t.settings.webcliKubectl, timeout: t.settings.webcliCommandTimeoutMs };
    t.settings.webcliKubectl = slow;
    t.settings.webcliCommandTimeoutMs = 1_000;
    const client = await session(tokenFor(clusterId));
    try {
      expect(await client.next("ready")).toMatchObject({ type: "ready" });
      const started = Date.now();
      const res = await client.run("kubectl get nodes --watch");
      expect(res.code).toBe(EXIT.timeout);
      expect(res.stderr).toBe("\nthe command ran longer than 1000 ms and was ended\n");
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(Date.now() - started).toBeLessThan(10_000);
      // The process itself is gone (SIGKILL), not only its output.
      const pid = Number(readFileSync(join(dir, "pid"), "utf8"));
      expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
      // The session takes the next command.
      expect((await client.run("help")).code).toBe(0);
    } finally {
      client.close();
      t.settings.webcliKubectl = saved.kubectl;
      t.settings.webcliCommandTimeoutMs = saved.timeout;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("stops a command whose output passes the cap, sending no more than the cap, with exit 125", async () => {
    const saved = t.settings.webcliOutputLimitBytes;
    t.settings.webcliOutputLimitBytes = 1_024;
    const client = await session(tokenFor(clusterId));
    try {
      expect(await client.next("ready")).toMatchObject({ type: "ready" });
      // The real kubectl's help for get is about 6 KB.
      const res = await client.run("kubectl get --help");
      expect(res.code).toBe(EXIT.outputLimit);
      expect(Buffer.byteLength(res.stdout)).toBeLessThanOrEqual(1_024);
      expect(res.stderr).toBe("\noutput stopped at 1024 bytes; the command was ended\n");
      // Under the cap, the same session runs on.
      t.settings.webcliOutputLimitBytes = saved;
      const full = await client.run("kubectl get --help");
      expect(full.code).toBe(0);
      expect(Buffer.byteLength(full.stdout)).toBeGreaterThan(1_024);
    } finally {
      client.close();
      t.settings.webcliOutputLimitBytes = saved;
    }
  });
});

describe("command lines", () => {
  it("splits words with quotes and escapes, expands nothing, refuses shell syntax", () => {
    expect(splitCommandLine(`kubectl get pods -l 'app in (a,b)' -o "jsonpath={.items[*].metadata.name}"`)).toEqual({
      ok: true,
      argv: ["kubectl", "get", "pods", "-l", "app in (a,b)", "-o", "jsonpath={.items[*].metadata.name}"],
    });
    expect(splitCommandLine("kubectl get $HOME *  ~")).toEqual({
      ok: true,
      argv: ["kubectl", "get", "$HOME", "*", "~"],
    });
    expect(splitCommandLine("kubectl get a\\|b")).toEqual({ ok: true, argv: ["kubectl", "get", "a|b"] });
    for (const line of ["a | b", "a; b", "a && b", "a > f", "a < f", "a `b`", "a $(b)", "'open", '"open', "a\nb"]) {
      expect(splitCommandLine(line).ok, line).toBe(false);
    }
  });

  it("allows kubectl's API commands, refuses host access by flag in any spelling", () => {
    const dir = "/tmp/keelson-webcli-x";
    expect(decide(["kubectl", "-n", "kube-system", "get", "pods"], dir)).toEqual({
      kind: "kubectl",
      args: ["-n", "kube-system", "get", "pods"],
    });
    expect(decide(["kubectl", "run", "x", "--image=busybox", "--", "sh", "-c", "--kubeconfig"], dir).kind).toBe(
      "kubectl",
    );
    expect(decide(["kubectl", "apply", "-f", "manifest.yaml"], dir).kind).toBe("kubectl");
    for (const argv of [
      ["kubectl", "get", "nodes", "--kubeconfig", "/etc/x"],
      ["kubectl", "get", "nodes", "--token=abc"],
      ["kubectl", "get", "nodes", "-shttps://x"],
      ["kubectl", "apply", "-f/etc/passwd"],
      ["kubectl", "apply", "--filename=../x.yaml"],
      ["kubectl", "apply", "-f", "https://example.test/x.yaml"],
      ["kubectl", "apply", "-f", "-"],
      ["kubectl", "create", "secret", "generic", "s", "--from-file=/etc/shadow"],
      ["kubectl", "get", "pods", "-o", "go-template-file=/etc/x"],
      ["kubectl", "cluster-info", "dump", "--output-directory=/tmp/x"],
      ["kubectl", "port-forward", "pod/x", "80"],
      ["kubectl", "cp", "pod:/x", "/etc/x"],
      ["kubectl", "foo"],
      ["bash"],
    ]) {
      expect(decide(argv, dir).kind, argv.join(" ")).toBe("refused");
    }
  });
});
