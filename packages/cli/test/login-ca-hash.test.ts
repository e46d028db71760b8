import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caCertHash } from "@keelson/protocol";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { defaultServerSettings } from "../../control-plane/src/settings.ts";
import { prepareServerTls } from "../../control-plane/src/tls/server-tls.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../../control-plane/test/helpers.ts";
import { keelson } from "./run-cli.ts";

/**
 * `keelson login --ca-hash`: against a real control plane serving https with the CA it made
 * (KEELSON_TLS=auto), the pinned CA is kept in the context and trusted alone afterwards; a hash
 * of another CA is refused before the password goes out, and changes nothing.
 */
vi.setConfig({ testTimeout: 120_000 });

let t: TestApp;
let dir: string;
let url: string;
let caPem: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "keelson-cli-pin-"));
  const dataDir = join(dir, "data");
  const settings = defaultServerSettings({ dataDir, tlsMode: "auto", publicUrl: "https://127.0.0.1:8443" });
  const tls = await prepareServerTls(settings);
  t = await createTestApp({ dataDir, settings, ...(tls ? { tls } : {}) });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  url = `https://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  caPem = readFileSync(join(dataDir, "tls", "ca.crt"), "utf8");
  const user = await t.request({
    method: "POST",
    url: `/v1/projects/${t.projectId}/users`,
    token: ADMIN_TOKEN,
    payload: { name: "pinned", password: "correct horse battery" },
  });
  expect(user.statusCode, user.body).toBeLessThan(300);
}, 60_000);
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Another CA, made by openssl: a pin of it must not accept this control plane. */
function otherCaHash(): string {
  const key = join(dir, "other.key");
  const crt = join(dir, "other.crt");
  execFileSync("openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key], { stdio: "pipe" });
  execFileSync("openssl", ["req", "-x509", "-new", "-key", key, "-subj", "/CN=other-ca", "-days", "1", "-out", crt], {
    stdio: "pipe",
  });
  return caCertHash(readFileSync(crt, "utf8"));
}

const login = (env: Record<string, string>, ...extra: string[]) =>
  keelson(["login", "--url", url, "--user", "pinned", "--password-stdin", ...extra], {
    env,
    input: "correct horse battery\n",
  });

describe("keelson login --ca-hash", () => {
  it("pins the served CA by its hash, keeps it in the context, and later commands trust it alone", async () => {
    const config = join(dir, "ok", "config.yaml");
    const env = { KEELSON_CONFIG: config, HOME: dir };
    // Without a pin the server's certificate is not trusted: the system's CAs do not know it.
    const unpinned = await login(env);
    expect(unpinned.code).toBe(3);
    expect(existsSync(config)).toBe(false);

    const hash = caCertHash(caPem);
    const res = await login(env, "--ca-hash", hash.toUpperCase().replace("SHA256:", "sha256:"));
    expect(res.code, res.stderr).toBe(0);
    const text = readFileSync(config, "utf8");
    expect(text).toContain(`ca-hash: ${hash}`);
    const caFile = /ca-file: (\S+)/.exec(text)?.[1] as string;
    expect(readFileSync(caFile, "utf8").trim()).toBe(caPem.trim());

    const list = await keelson(["clusters", "list", "-o", "json"], { env });
    expect(list.code, list.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(list.stdout))).toBe(true);

    // The kept CA is what is trusted: another CA in its place, and the same command fails.
    otherCaHash();
    writeFileSync(caFile, readFileSync(join(dir, "other.crt"), "utf8"));
    const swapped = await keelson(["clusters", "list"], { env });
    expect(swapped.code).toBe(3);

    // A CA file given at the next login replaces the pinned one, and the pin goes with it.
    writeFileSync(caFile, caPem);
    const byFile = await login(env, "--ca-file", caFile);
    expect(byFile.code, byFile.stderr).toBe(0);
    expect(readFileSync(config, "utf8")).not.toContain("ca-hash");
  });

  it("refuses a hash of another CA, naming both, and writes nothing", async () => {
    const other = otherCaHash();
    const config = join(dir, "refused", "config.yaml");
    const res = await login({ KEELSON_CONFIG: config, HOME: dir }, "--ca-hash", other);
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(`offers CA ${caCertHash(caPem)}, not --ca-hash ${other}: refusing to log in`);
    expect(existsSync(config)).toBe(false);
    expect(existsSync(join(dir, "refused", "ca-default.pem"))).toBe(false);
  });

  it("usage errors: a malformed hash, plain http, and --ca-file beside it", async () => {
    const env = { KEELSON_CONFIG: join(dir, "usage", "config.yaml"), HOME: dir };
    const malformed = await login(env, "--ca-hash", "sha256:abc");
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain("--ca-hash sha256:abc: must be sha256:<64 hex digits>");
    const hash = caCertHash(caPem);
    const http = await keelson(
      ["login", "--url", "http://127.0.0.1:1", "--user", "x", "--password-stdin", "--ca-hash", hash],
      { env, input: "pw\n" },
    );
    expect(http.code).toBe(2);
    expect(http.stderr).toContain("--ca-hash needs an https:// control plane, not http://127.0.0.1:1");
    const both = await login(env, "--ca-hash", hash, "--ca-file", join(dir, "other.crt"));
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("give --ca-hash or --ca-file");
    expect(existsSync(join(dir, "usage"))).toBe(false);
  });
});
