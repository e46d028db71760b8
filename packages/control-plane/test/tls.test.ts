import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caCertHash, isLoopbackHost } from "@keelson/protocol";
import { SettingsError } from "@keelson/settings";
import { describe, expect, it } from "vitest";
import { defaultServerSettings } from "../src/settings.ts";
import { decideTlsMode, insecureHttpWarning } from "../src/tls/mode.ts";
import { serverNames } from "../src/tls/names.ts";
import { prepareServerTls } from "../src/tls/server-tls.ts";
import { createTestApp } from "./helpers.ts";

const base = { insecureHttp: false };

describe("KEELSON_TLS: the decision", () => {
  it("is off on loopback, auto elsewhere, files when a certificate is configured", () => {
    expect(decideTlsMode({ ...base, host: "127.0.0.1" })).toBe("off");
    expect(decideTlsMode({ ...base, host: "::1" })).toBe("off");
    expect(decideTlsMode({ ...base, host: "localhost" })).toBe("off");
    expect(decideTlsMode({ ...base, host: "0.0.0.0" })).toBe("auto");
    expect(decideTlsMode({ ...base, host: "10.0.0.5" })).toBe("auto");
    expect(decideTlsMode({ ...base, host: "cp.example.internal" })).toBe("auto");
    expect(decideTlsMode({ ...base, host: "0.0.0.0", tlsCertFile: "/c", tlsKeyFile: "/k" })).toBe("files");
    expect(decideTlsMode({ ...base, host: "127.0.0.1", tls: "auto" })).toBe("auto");
    expect(isLoopbackHost("127.1.2.3")).toBe(true);
    expect(isLoopbackHost("::")).toBe(false);
  });

  it("refuses plain HTTP on a non-loopback listener unless acknowledged, naming what to set", () => {
    const refusal = () => decideTlsMode({ ...base, host: "0.0.0.0", tls: "off" });
    expect(refusal).toThrow(SettingsError);
    expect(refusal).toThrow(/KEELSON_TLS=auto.*KEELSON_INSECURE_HTTP=true/);
    const acknowledged = { ...base, host: "0.0.0.0", tls: "off" as const, insecureHttp: true };
    expect(decideTlsMode(acknowledged)).toBe("off");
    expect(insecureHttpWarning({ ...acknowledged, tlsMode: "off" })).toMatch(/clear text/);
    expect(insecureHttpWarning({ ...base, host: "127.0.0.1", tlsMode: "off" })).toBeUndefined();
  });

  it("refuses files without both files, and files settings without files mode", () => {
    expect(() => decideTlsMode({ ...base, host: "0.0.0.0", tls: "files", tlsCertFile: "/c" })).toThrow(
      /KEELSON_TLS_KEY_FILE/,
    );
    expect(() => decideTlsMode({ ...base, host: "0.0.0.0", tls: "auto", tlsChainFile: "/c" })).toThrow(
      /belong to KEELSON_TLS=files/,
    );
  });

  it("names the public URL's host, the listen address and the extra names", () => {
    expect(
      serverNames({
        publicUrl: "https://cp.example.internal:8443",
        host: "10.1.2.3",
        tlsServerNames: "api.x, 10.9.9.9",
      }),
    ).toEqual({ dnsNames: ["api.x", "cp.example.internal"], ipAddresses: ["10.1.2.3", "10.9.9.9"] });
    const wildcard = serverNames({ host: "0.0.0.0" });
    expect(wildcard.dnsNames).toContain("localhost");
    expect(wildcard.ipAddresses).toContain("127.0.0.1");
  });
});

describe("KEELSON_TLS=auto: the CA and its hash", () => {
  it("makes a CA (key 0600) whose hash is in join-token answers and whose bundle is public; a restart writes nothing", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-tls-"));
    const settings = defaultServerSettings({ dataDir, tlsMode: "auto", publicUrl: "https://cp.test.internal:8443" });
    const tls = await prepareServerTls(settings);
    const t = await createTestApp({ dataDir, settings, ...(tls ? { tls } : {}) });
    const caPem = readFileSync(join(dataDir, "tls", "ca.crt"), "utf8");
    expect(statSync(join(dataDir, "tls", "ca.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, "tls", "server.key")).mode & 0o777).toBe(0o600);

    const bundle = await t.request({ method: "GET", url: "/v1/ca", token: null });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.headers["content-type"]).toMatch(/x-pem-file/);
    expect(bundle.body).toBe(caPem);
    expect(bundle.headers["strict-transport-security"]).toMatch(/max-age=\d+/);

    const issued = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
    expect(issued.statusCode).toBe(201);
    const hash = issued.json<{ caCertHash: string }>().caCertHash;
    // The README's openssl pipeline gives the same pin.
    const spki = execFileSync("openssl", ["x509", "-pubkey", "-noout"], { input: caPem });
    const der = execFileSync("openssl", ["pkey", "-pubin", "-outform", "der"], { input: spki });
    const digest = execFileSync("openssl", ["dgst", "-sha256", "-r"], { input: der }).toString().split(" ")[0];
    expect(hash).toBe(`sha256:${digest}`);
    expect(hash).toBe(caCertHash(caPem));

    // The server certificate chains to the CA and names the advertised host.
    const serverCrt = join(dataDir, "tls", "server.crt");
    expect(
      execFileSync("openssl", ["verify", "-CAfile", join(dataDir, "tls", "ca.crt"), serverCrt]).toString(),
    ).toMatch(/OK/);
    expect(execFileSync("openssl", ["x509", "-noout", "-ext", "subjectAltName", "-in", serverCrt]).toString()).toMatch(
      /DNS:cp\.test\.internal.*IP Address:127\.0\.0\.1/s,
    );

    // A restart keeps the CA and the still-fresh server certificate, without rewriting them.
    const before = { ca: statSync(join(dataDir, "tls", "ca.crt")).mtimeMs, leaf: statSync(serverCrt).mtimeMs };
    const again = await prepareServerTls(settings);
    expect(again?.caCertHash).toBe(hash);
    expect(again?.context().cert).toBe(readFileSync(serverCrt, "utf8"));
    expect(statSync(join(dataDir, "tls", "ca.crt")).mtimeMs).toBe(before.ca);
    expect(statSync(serverCrt).mtimeMs).toBe(before.leaf);
  });

  it("rotation: a next CA is served beside the current one, which keeps signing and stays the pin", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-tls-"));
    const current = await prepareServerTls(defaultServerSettings({ dataDir, tlsMode: "auto" }));
    const staged = await prepareServerTls(defaultServerSettings({ dataDir, tlsMode: "auto", tlsNextCa: true }));
    const nextPem = readFileSync(join(dataDir, "tls", "next", "ca.crt"), "utf8");
    expect(staged?.caCertHash).toBe(current?.caCertHash);
    expect(staged?.caBundlePem).toBe(`${current?.caBundlePem}${nextPem}`);
    expect(staged?.context().cert).toBe(current?.context().cert);
  });

  it("files: serves the operator's chain and pins its root", async () => {
    const autoDir = mkdtempSync(join(tmpdir(), "keelson-tls-"));
    await prepareServerTls(defaultServerSettings({ dataDir: autoDir, tlsMode: "auto" }));
    const files = {
      tlsCertFile: join(autoDir, "tls", "server.crt"),
      tlsKeyFile: join(autoDir, "tls", "server.key"),
      tlsChainFile: join(autoDir, "tls", "ca.crt"),
    };
    const tls = await prepareServerTls(defaultServerSettings({ ...files, tlsMode: "files" }));
    const caPem = readFileSync(files.tlsChainFile, "utf8");
    expect(tls?.caBundlePem?.trim()).toBe(caPem.trim());
    expect(tls?.caCertHash).toBe(caCertHash(caPem));
    expect(tls?.context().cert).toContain(readFileSync(files.tlsCertFile, "utf8").trim());
  });

  it("plain HTTP: no CA bundle (404 in the error shape) and caCertHash null", async () => {
    const t = await createTestApp();
    const bundle = await t.request({ method: "GET", url: "/v1/ca", token: null });
    expect(bundle.statusCode).toBe(404);
    expect(bundle.json()).toMatchObject({ code: "not_found" });
    expect(bundle.headers["strict-transport-security"]).toBeUndefined();
    const issued = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
    expect(issued.json()).toMatchObject({ caCertHash: null, token: expect.any(String) });
  });
});
