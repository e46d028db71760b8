import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN } from "../../control-plane/test/helpers.ts";
import type { Fleet } from "../../control-plane/test/membership-harness.ts";
import { type FleetAllocator, readyCluster } from "../../control-plane/test/rollout-harness.ts";
import { useCliFleet } from "./cli-fleet.ts";
import { keelson } from "./run-cli.ts";

/**
 * The real `keelson` binary against a real control plane listening on loopback, with
 * simulated agents (test/sim) speaking the real agent protocol for the rollouts.
 */

// Every test runs the CLI as a process several times (a second or more each on a busy machine).
vi.setConfig({ testTimeout: 180_000 });

let f: Fleet;
let pool: FleetAllocator;
let dir: string;
let env: Record<string, string>;

useCliFleet(6, { namePrefix: "cli", phaseTimeMs: 150 }, (fleet) => {
  ({ f, pool, dir, env } = fleet);
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("keelson login", () => {
  it("logs in the Keystone way and keeps the token in the config file, mode 0600", async () => {
    const user = await f.t.request({
      method: "POST",
      url: `/v1/projects/${f.t.projectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "alice", password: "correct horse battery" },
    });
    expect(user.statusCode, user.body).toBeLessThan(300);
    const config = join(dir, "login", "config.yaml");
    const login = await keelson(
      ["login", "--url", f.base, "--user", "alice", "--project", "default", "--password-stdin"],
      {
        env: { KEELSON_CONFIG: config, HOME: dir },
        input: "correct horse battery\n",
      },
    );
    expect(login.code, login.stderr).toBe(0);
    expect(statSync(config).mode & 0o777).toBe(0o600);
    const text = readFileSync(config, "utf8");
    expect(text).toContain(`project: ${f.t.projectId}`);
    expect(text).toMatch(/token: \S{20,}/);
    // The stored token is what the next command uses: no URL or token given.
    const list = await keelson(["clusters", "list", "-o", "json"], { env: { KEELSON_CONFIG: config, HOME: dir } });
    expect(list.code, list.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(list.stdout))).toBe(true);
    const contexts = await keelson(["config", "get-contexts"], { env: { KEELSON_CONFIG: config, HOME: dir } });
    expect(contexts.stdout).toMatch(/\*\s+default\s+http:\/\/127\.0\.0\.1:\d+\s+default\s+alice/);

    const wrong = await keelson(["login", "--url", f.base, "--user", "alice", "--password-stdin"], {
      env: { KEELSON_CONFIG: join(dir, "other.yaml"), HOME: dir },
      input: "not the password\n",
    });
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toContain("401");
  });
});

describe("keelson config", () => {
  it("set-context, use-context, get-contexts and --context pick the control plane and token", async () => {
    const config = join(dir, "contexts.yaml");
    const only = { KEELSON_CONFIG: config, HOME: dir };
    const set = await keelson(["config", "set-context", "admin", "--use"], { env: { ...env, KEELSON_CONFIG: config } });
    expect(set.code, set.stderr).toBe(0);
    expect(statSync(config).mode & 0o777).toBe(0o600);
    expect((await keelson(["clusters", "list"], { env: only })).code).toBe(0);

    const other = await keelson(["--url", "http://127.0.0.1:9", "config", "set-context", "other"], { env: only });
    expect(other.code, other.stderr).toBe(0);
    expect((await keelson(["config", "use-context", "other"], { env: only })).code).toBe(0);
    expect((await keelson(["config", "current-context"], { env: only })).stdout.trim()).toBe("other");
    // The other context has no token: a usage error before anything is sent.
    const noToken = await keelson(["clusters", "list"], { env: only });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain("no token for http://127.0.0.1:9");
    expect((await keelson(["--context", "admin", "clusters", "list"], { env: only })).code).toBe(0);
    // A token is sent only to its own context's URL, never to one given on the command line.
    const elsewhere = await keelson(["--context", "admin", "--url", "http://127.0.0.1:9", "clusters", "list"], {
      env: only,
    });
    expect(elsewhere.code).toBe(2);
    const listed = await keelson(["config", "get-contexts", "-o", "json"], { env: only });
    expect(JSON.parse(listed.stdout)).toEqual([
      { current: false, name: "admin", url: f.base, project: "", user: "" },
      { current: true, name: "other", url: "http://127.0.0.1:9", project: "", user: "" },
    ]);
    expect((await keelson(["config", "use-context", "nope"], { env: only })).code).toBe(1);
  });
});

describe("HTTPS with --ca-file", () => {
  it("trusts the given CA, and refuses an unknown certificate as unreachable", async () => {
    const tlsDir = join(dir, "tls");
    mkdirSync(tlsDir);
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-keyout",
        join(tlsDir, "key.pem"),
        "-out",
        join(tlsDir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    // TLS in front of the control plane (as a terminating proxy would be), with that certificate.
    const port = Number(new URL(f.base).port);
    const proxy = createTlsServer(
      { key: readFileSync(join(tlsDir, "key.pem")), cert: readFileSync(join(tlsDir, "cert.pem")) },
      (socket) => {
        const upstream = connect(port, "127.0.0.1");
        socket.pipe(upstream).pipe(socket);
        socket.on("error", () => upstream.destroy());
        upstream.on("error", () => socket.destroy());
      },
    );
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const url = `https://127.0.0.1:${(proxy.address() as { port: number }).port}`;
      const untrusted = await keelson(["clusters", "list", "--url", url], { env });
      expect(untrusted.code).toBe(3);
      expect(untrusted.stderr).toMatch(/self[- ]signed certificate/);
      const trusted = await keelson(["clusters", "list", "--url", url, "--ca-file", join(tlsDir, "cert.pem")], { env });
      expect(trusted.code, trusted.stderr).toBe(0);
      const fromEnv = await keelson(["clusters", "list", "-o", "json"], {
        env: { ...env, KEELSON_URL: url, KEELSON_CA_FILE: join(tlsDir, "cert.pem") },
      });
      expect(fromEnv.code, fromEnv.stderr).toBe(0);
      const missing = await keelson(["clusters", "list", "--url", url, "--ca-file", join(tlsDir, "none.pem")], { env });
      expect(missing.code).toBe(2);
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });
});

describe("keelson clusters", () => {
  it("create -f, list -o json, get, update, delete: a round trip", async () => {
    const spec = join(dir, "rt.yaml");
    writeFileSync(spec, "name: cli-rt\nmasterVipIpv4: 10.0.0.10\nmasterVipIface: eth0\n");
    const created = await keelson(["clusters", "create", "-f", spec], { env });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/succeeded: cluster\.create/);

    const list = await keelson(["clusters", "list", "-o", "json"], { env });
    expect(list.code, list.stderr).toBe(0);
    const mine = (JSON.parse(list.stdout) as { name: string; uuid: string }[]).find((c) => c.name === "cli-rt");
    expect(mine?.uuid).toMatch(UUID);

    const get = await keelson(["clusters", "get", "cli-rt"], { env });
    expect(get.code, get.stderr).toBe(0);
    const [header, row] = get.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^NAME\s+UUID\s+STATUS\s+TASK\s+VERSION/);
    expect(row).toMatch(new RegExp(`^cli-rt\\s+${mine?.uuid}\\s+pending\\s+success`));
    // Columns line up: each header starts where its values do.
    expect(row?.indexOf(mine?.uuid as string)).toBe(header?.indexOf("UUID"));
    expect(get.stdout).not.toContain("\x1b["); // not a terminal: no colours

    const update = await keelson(
      ["clusters", "update", mine?.uuid as string, "--set", "tags.team=ops", "--set", "masterVipIpv4=10.0.0.11"],
      { env },
    );
    expect(update.code, update.stderr).toBe(0);
    expect(update.stdout).toMatch(/succeeded: cluster\.update/);
    // A field the update set does not take is named, as the API's Warning header does.
    expect(update.stderr).toContain("warning: field masterVipIpv4 is not accepted here and was ignored");
    const after = await keelson(["clusters", "get", "cli-rt", "-o", "yaml"], { env });
    expect(after.stdout).toMatch(/tags:\n\s+team: ops/);
    expect(after.stdout).toContain("masterVipIpv4: 10.0.0.10");

    const deleted = await keelson(["clusters", "delete", "cli-rt"], { env });
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toMatch(/succeeded: cluster\.delete/);
    const gone = await keelson(["clusters", "list", "-o", "json"], { env });
    expect((JSON.parse(gone.stdout) as { name: string }[]).map((c) => c.name)).not.toContain("cli-rt");
  });

  it("a refused create exits 1 showing the API's message and field", async () => {
    const bad = await keelson(["clusters", "create", "-f", "-"], {
      env,
      input: "{name: cli-bad, masterVipIpv4: nope, masterVipIface: eth0}",
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/400 \w+: .*\(field masterVipIpv4\)/);
  });
});

describe("exit codes", () => {
  it("3 for a wrong token and for an unreachable control plane, 2 for usage errors", async () => {
    const wrongToken = await keelson(["clusters", "list"], { env: { ...env, KEELSON_TOKEN: "nope" } });
    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toContain("403");

    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const unreachable = await keelson(["clusters", "list", "--url", `http://127.0.0.1:${port}`], { env });
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toMatch(/cannot reach the control plane .*ECONNREFUSED/);

    // A control plane that accepts the connection and never answers: the request times out.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
      const hung = await keelson(["clusters", "list", "--url", url, "--request-timeout-ms", "300"], { env });
      expect(hung.code).toBe(3);
      expect(hung.stderr).toContain(`cannot reach the control plane at ${url}: no answer in time`);
    } finally {
      silent.close();
    }

    for (const args of [
      ["clusters", "create"],
      ["clusters", "list", "--bogus"],
      ["restart"],
      ["clusters", "list", "-o", "xml"],
    ]) {
      const usage = await keelson(args, { env });
      expect(usage.code, args.join(" ")).toBe(2);
    }
    const badSetting = await keelson(["clusters", "list"], { env: { ...env, KEELSON_URL: "ftp://x" } });
    expect(badSetting.code).toBe(2);
    expect(badSetting.stderr).toContain('KEELSON_URL="ftp://x": must be an http:// or https:// URL');
  });
});

describe("cluster actions", () => {
  it("kubeconfig -o writes the file (0600)", async () => {
    const created = await keelson(["clusters", "create", "-f", "-"], {
      env,
      input: "{name: cli-kc, masterVipIpv4: 10.0.0.20, masterVipIface: eth0}",
    });
    expect(created.code, created.stderr).toBe(0);
    const file = join(dir, "cli-kc.yaml");
    const res = await keelson(["kubeconfig", "cli-kc", "-o", file], { env });
    expect(res.code, res.stderr).toBe(0);
    const text = readFileSync(file, "utf8");
    expect(text).toContain("kind: Config");
    expect(text).toContain("server: https://10.0.0.20:");
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("restart --no-wait prints the operation id and returns", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(1);
    await readyCluster(f, "cli-nowait", [master as never], workers);
    const res = await keelson(["restart", "cli-nowait", "--no-wait"], { env });
    expect(res.code, res.stderr).toBe(0);
    const id = res.stdout.trim();
    expect(id).toMatch(UUID);
    await f.idle();
    const op = await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/operations?limit=1000` });
    expect((op.json() as { uuid: string; kind: string; state: string }[]).find((o) => o.uuid === id)).toMatchObject({
      kind: "cluster.restart",
      state: "succeeded",
    });
  });

  it("restart follows the rollout to its end, a line per change without a terminal", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(2);
    await readyCluster(f, "cli-follow", [master as never], workers);
    const res = await keelson(["restart", "cli-follow", "--batch-percent", "50"], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/succeeded: cluster\.restart [0-9a-f-]{36} in /);
    // 1 master, then 2 workers at 50%: three batches, each node seen rolling and done.
    for (const [i, agent] of [master, ...workers].entries()) {
      const name = agent?.hostname as string;
      expect(res.stderr).toMatch(
        new RegExp(`batch ${i + 1}/3 \\((master|workers)\\)  ${name} \\((master|worker)\\): rolling`),
      );
      expect(res.stderr).toMatch(new RegExp(`${name} \\((master|worker)\\): done`));
    }
    expect(res.stderr).not.toContain("\x1b[");
  });
});
