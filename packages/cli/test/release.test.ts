import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isLocalCommand } from "../src/commands/release.ts";
import { CliError, EXIT } from "../src/errors.ts";
import { downloadRelease, type Say } from "../src/release/install.ts";
import { layoutOf } from "../src/release/layout.ts";
import { failureOf } from "../src/release/service.ts";
import { ensureServiceUser, findServiceUser } from "../src/release/service-user.ts";
import { serverUnit } from "../src/release/unit.ts";
import { readUpgradeConfig } from "../src/release/upgrade-config.ts";

const work = mkdtempSync(join(tmpdir(), "keelson-release-unit-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const quiet: Say = { note: () => {}, print: () => {} };
const sha = (text: string) => createHash("sha256").update(text).digest("hex");

/** A small release as pack-release lays one out (manifest, one file, SHA256SUMS), packed as the location serves it. */
function fakeRelease(location: string, version: string, tamper?: "tarball" | "content"): void {
  const dir = join(location, `keelson-${version}`);
  mkdirSync(join(dir, "packages"), { recursive: true });
  const manifest = JSON.stringify({ format: 1, name: "keelson", version, entries: { server: "packages/server.mjs" } });
  writeFileSync(join(dir, "manifest.json"), manifest);
  writeFileSync(join(dir, "packages", "server.mjs"), "export {};\n");
  writeFileSync(
    join(dir, "SHA256SUMS"),
    `${sha(manifest)}  manifest.json\n${sha("export {};\n")}  packages/server.mjs\n`,
  );
  if (tamper === "content") writeFileSync(join(dir, "packages", "server.mjs"), "process.exit(1);\n");
  const tarball = join(location, `keelson-${version}.tar.gz`);
  execFileSync("tar", ["-czf", tarball, "-C", location, `keelson-${version}`]);
  const digest = createHash("sha256").update(readFileSync(tarball)).digest("hex");
  writeFileSync(`${tarball}.sha256`, `${digest}  keelson-${version}.tar.gz\n`);
  if (tamper === "tarball") writeFileSync(tarball, Buffer.concat([readFileSync(tarball), Buffer.from("x")]));
  rmSync(dir, { recursive: true });
}

describe("keelson download", () => {
  const location = join(work, "location");
  mkdirSync(location, { recursive: true });
  const layout = layoutOf(join(work, "root"));

  it("fetches a tarball from a directory, checks it and its SHA256SUMS, and is idempotent", async () => {
    fakeRelease(location, "1.2.3");
    expect(await downloadRelease(layout, location, "-", "1.2.3", quiet)).toBe("1.2.3");
    expect(readFileSync(join(layout.releases, "1.2.3", "packages", "server.mjs"), "utf8")).toBe("export {};\n");
    const notes: string[] = [];
    await downloadRelease(layout, location, "-", "1.2.3", { ...quiet, note: (t) => notes.push(t) });
    expect(notes.join("\n")).toContain("already in");
  });

  it("refuses a tarball that does not match its .sha256, and unpacks nothing", async () => {
    fakeRelease(location, "1.2.4", "tarball");
    await expect(downloadRelease(layout, location, "-", "1.2.4", quiet)).rejects.toThrow(
      "keelson-1.2.4.tar.gz does not match its .sha256",
    );
    expect(() => readFileSync(join(layout.releases, "1.2.4", "manifest.json"))).toThrow();
  });

  it("refuses a release whose files do not match its SHA256SUMS, naming the file", async () => {
    fakeRelease(location, "1.2.5", "content");
    await expect(downloadRelease(layout, location, "-", "1.2.5", quiet)).rejects.toThrow(/packages\/server\.mjs/);
    expect(() => readFileSync(join(layout.releases, "1.2.5", "manifest.json"))).toThrow();
  });

  it("refuses a location without the release", async () => {
    await expect(downloadRelease(layout, location, "-", "9.9.9", quiet)).rejects.toThrow("has no keelson-9.9.9.tar.gz");
  });
});

describe("keelson download from an https URL", () => {
  const location = join(work, "served");
  mkdirSync(location, { recursive: true });
  const layout = layoutOf(join(work, "root-https"));
  const SECRET = "rls_correct-secret";
  let server: Server;
  let base: string;
  const seen: string[] = [];
  const caFile = join(work, "release-ca.crt");

  beforeAll(async () => {
    // A real X.509 chain from openssl: a CA and a server certificate for 127.0.0.1 it signs.
    const o = (...args: string[]) => execFileSync("openssl", args, { cwd: work, stdio: "pipe" });
    o("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "release-ca.key");
    o(
      "req",
      "-x509",
      "-new",
      "-key",
      "release-ca.key",
      "-subj",
      "/CN=release-ca",
      "-days",
      "1",
      "-out",
      "release-ca.crt",
    );
    o("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "release.key");
    o("req", "-new", "-key", "release.key", "-subj", "/CN=127.0.0.1", "-out", "release.csr");
    writeFileSync(join(work, "release.ext"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    o(
      "x509",
      "-req",
      "-in",
      "release.csr",
      "-CA",
      "release-ca.crt",
      "-CAkey",
      "release-ca.key",
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      "release.ext",
      "-out",
      "release.crt",
    );
    server = createServer(
      { key: readFileSync(join(work, "release.key")), cert: readFileSync(join(work, "release.crt")) },
      (req, res) => {
        seen.push(`${req.headers.authorization ?? "none"} ${req.url}`);
        if (req.headers.authorization !== `Bearer ${SECRET}`) {
          res.writeHead(401, { "www-authenticate": "Bearer" }).end("unauthorised");
          return;
        }
        const file = join(location, basename(req.url ?? ""));
        if (!existsSync(file)) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200).end(readFileSync(file));
      },
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `https://127.0.0.1:${(server.address() as AddressInfo).port}/releases/`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("fetches with the secret as bearer token, verifies SHA256SUMS and unpacks beside the releases", async () => {
    fakeRelease(location, "2.0.0");
    expect(await downloadRelease(layout, base, SECRET, "2.0.0", quiet, caFile)).toBe("2.0.0");
    expect(readFileSync(join(layout.releases, "2.0.0", "packages", "server.mjs"), "utf8")).toBe("export {};\n");
    expect(seen).toContain(`Bearer ${SECRET} /releases/keelson-2.0.0.tar.gz`);
    expect(readdirSync(layout.releases)).toEqual(["2.0.0"]);
  });

  it("refuses a wrong checksum, a refused secret (exit 3), a missing release and an untrusted server; unpacks nothing", async () => {
    fakeRelease(location, "2.0.1", "tarball");
    await expect(downloadRelease(layout, base, SECRET, "2.0.1", quiet, caFile)).rejects.toThrow(
      "keelson-2.0.1.tar.gz does not match its .sha256: refused (nothing was unpacked)",
    );
    fakeRelease(location, "2.0.2");
    const refused = await downloadRelease(layout, base, "rls_wrong", "2.0.2", quiet, caFile).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CliError);
    expect((refused as CliError).message).toContain("401: the release location refused the secret");
    expect((refused as CliError).exitCode).toBe(EXIT.unreachable);
    await expect(downloadRelease(layout, base, SECRET, "9.0.0", quiet, caFile)).rejects.toThrow(
      "404: the release location has no keelson-9.0.0.tar.gz.sha256",
    );
    // Without the CA file the server's certificate is not trusted: nothing is fetched.
    const untrusted = await downloadRelease(layout, base, SECRET, "2.0.2", quiet).catch((e: unknown) => e);
    expect((untrusted as CliError).message).toMatch(/cannot fetch .*keelson-2\.0\.2\.tar\.gz\.sha256: .*certificate/);
    expect((untrusted as CliError).exitCode).toBe(EXIT.unreachable);
    expect(readdirSync(layout.releases)).toEqual(["2.0.0"]);
  });
});

describe("the upgrade's config file", () => {
  const write = (text: string) => {
    const file = join(work, `c-${Math.random()}.yaml`);
    writeFileSync(file, text);
    return file;
  };
  it("takes the spec's host parameters beside its own and fills the defaults", () => {
    expect(readUpgradeConfig(write("version: 0.3.0\nhostAgentRepo: a.tgz\ndockerRepo: b.tgz\n"))).toEqual({
      version: "0.3.0",
      readyTimeoutSeconds: 120,
      agentsTimeoutSeconds: 300,
      trialWindowSeconds: 30,
    });
  });
  it("names the field and the rule of what it refuses", () => {
    expect(() => readUpgradeConfig(write("versoin: 0.3.0\n"))).toThrow("field versoin: unknown");
    expect(() => readUpgradeConfig(write("root: /\n"))).toThrow("field version: required");
    expect(() => readUpgradeConfig(write("version: 0.3.0\ntrialWindowSeconds: -1\n"))).toThrow(
      "field trialWindowSeconds: must be a whole number of seconds",
    );
  });
});

describe("the operator's commands", () => {
  it("take `upgrade` for the control plane's unless it names a cluster's upgrade type", () => {
    expect(isLocalCommand(["upgrade", "--config", "u.yaml"])).toBe(true);
    expect(isLocalCommand(["upgrade", "demo", "--type", "patch"])).toBe(false);
    expect(isLocalCommand(["rollback", "--dir", "x"])).toBe(true);
    expect(isLocalCommand(["clusters", "list"])).toBe(false);
  });
  it("find what a failed start said in the supervisor's log", () => {
    const log = [
      "-- keelson-supervise: starting keelson-server 0.3.1",
      '{"level":30,"msg":"listening"}',
      '{"level":60,"msg":"this database needs keelson-server 0.4.0 or newer"}',
      "    at migrate (x.ts:1:1)",
      "-- keelson-supervise: keelson-server exited (code 1, signal null)",
      "-- keelson-supervise: starting keelson-server 0.3.1",
    ].join("\n");
    expect(failureOf(log)).toBe("this database needs keelson-server 0.4.0 or newer");
  });
  it("find a fatal record's error too", () => {
    const log = [
      "-- keelson-supervise: starting keelson-server 0.2.0",
      '{"level":50,"err":{"type":"Error","message":"listen EADDRINUSE: address already in use 127.0.0.1:8080"},"msg":"shutting down after an error"}',
      "-- keelson-supervise: keelson-server exited (code 1, signal null)",
    ].join("\n");
    expect(failureOf(log)).toBe(
      "shutting down after an error: listen EADDRINUSE: address already in use 127.0.0.1:8080",
    );
  });
  it("find an uncaught error's cause too: PostgreSQL's answer under the driver's error", () => {
    const log = [
      "-- keelson-supervise: starting keelson-server 0.3.1",
      'DrizzleQueryError: Failed query: CREATE TABLE "half" (;',
      "params: ",
      "    at PostgresJsPreparedQuery.queryWithCache (session.js:41:15) {",
      "  query: 'CREATE TABLE \"half\" (;',",
      '  cause: PostgresError: syntax error at or near ";"',
      "      at ErrorResponse (connection.js:794:26)",
      "    code: '42601',",
      "-- keelson-supervise: keelson-server exited (code 1, signal null)",
    ].join("\n");
    expect(failureOf(log)).toBe(
      'DrizzleQueryError: Failed query: CREATE TABLE "half" (;; cause: PostgresError: syntax error at or near ";"; code: \'42601\',',
    );
  });
  it("write a keelson-server.service for / that systemd-analyze verify accepts", () => {
    const dir = join(work, "unit");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, "keelson-server.service");
    const text = serverUnit(layoutOf("/"), "packages/control-plane/bin/keelson-server.mjs");
    expect(text).toContain(
      "ExecStart=/usr/bin/env node /opt/keelson/current/packages/control-plane/bin/keelson-server.mjs",
    );
    expect(text).toContain("StateDirectory=keelson");
    expect(text).toMatch(/^User=keelson\nGroup=keelson$/m);
    expect(text).toContain("AmbientCapabilities=CAP_NET_BIND_SERVICE");
    writeFileSync(file, text);
    expect(
      execFileSync("systemd-analyze", ["verify", file], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
    ).toBe("");
  });
});

describe("the service user", () => {
  it("is created once by the real useradd under the root (--prefix for a temporary root), a system user with no login", () => {
    const root = join(work, "user-root");
    mkdirSync(join(root, "etc"), { recursive: true });
    const layout = layoutOf(root);
    const hostPasswd = readFileSync("/etc/passwd", "utf8");
    expect(findServiceUser(root)).toBeUndefined();
    const made = ensureServiceUser(layout);
    expect(made).toMatchObject({ name: "keelson", created: true });
    expect(made.uid).toBeLessThan(1000);
    const line = readFileSync(join(root, "etc", "passwd"), "utf8")
      .split("\n")
      .find((l) => l.startsWith("keelson:"));
    // `!`: no shadow file under a bare temporary root, so no password field at all; never a login.
    expect(line).toMatch(
      new RegExp(`^keelson:[x!]:${made.uid}:${made.gid}:Keelson control plane:/var/lib/keelson:/usr/sbin/nologin$`),
    );
    expect(readFileSync(join(root, "etc", "group"), "utf8")).toMatch(new RegExp(`^keelson:[x!]:${made.gid}:`, "m"));
    // Again: found, not made twice (useradd would refuse).
    expect(ensureServiceUser(layout)).toEqual({ ...made, created: false });
    // The host's own passwd is untouched.
    expect(readFileSync("/etc/passwd", "utf8")).toBe(hostPasswd);
  });
});
