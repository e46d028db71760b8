import { execFile } from "node:child_process";
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as x509 from "@peculiar/x509";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClusterCa, createClusterCa } from "../src/pki/cluster-ca.ts";
import { generateKeyPair, webCrypto } from "../src/pki/keys.ts";
import { CertificateRequestError, signCertificate } from "../src/pki/sign.ts";

const run = promisify(execFile);
const HOUR = 3_600_000;
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";

let dir: string;
let ca: ClusterCa;
let caCert: X509Certificate;

function pemFile(name: string, pem: string): string {
  const file = join(dir, name);
  writeFileSync(file, pem);
  return file;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "keelson-pki-"));
  ca = await createClusterCa("prod-east", "5b1e0d0c-0000-4000-8000-000000000001");
  caCert = new X509Certificate(ca.certPem);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("createClusterCa", () => {
  it("makes a self-signed CA certificate", () => {
    expect(caCert.ca).toBe(true);
    expect(caCert.checkIssued(caCert)).toBe(true);
    expect(caCert.verify(caCert.publicKey)).toBe(true);
    expect(caCert.subject).toContain("CN=keelson-ca-prod-east");
    expect(caCert.subject).toContain("O=keelson");
    expect(caCert.issuer).toBe(caCert.subject);
    expect(caCert.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
  });

  it("is valid for ten years from (about) now", () => {
    const from = Date.parse(caCert.validFrom);
    const to = Date.parse(caCert.validTo);
    expect(Math.abs(from - Date.now())).toBeLessThan(10 * 60_000);
    const years = (to - from) / (365.25 * 24 * HOUR);
    expect(years).toBeGreaterThan(9.99);
    expect(years).toBeLessThan(10.01);
  });

  it("has a positive 16-byte serial that differs per CA", async () => {
    expect(caCert.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/);
    const other = new X509Certificate((await createClusterCa("prod-east", "another-id")).certPem);
    expect(other.serialNumber).not.toBe(caCert.serialNumber);
    expect(other.publicKey.export({ format: "der", type: "spki" })).not.toEqual(
      caCert.publicKey.export({ format: "der", type: "spki" }),
    );
  });

  it("returns the matching private key as plaintext PKCS#8", () => {
    expect(ca.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    const key = createPrivateKey(ca.keyPem);
    expect(key.asymmetricKeyType).toBe("ec");
    expect(createPublicKey(key).export({ format: "der", type: "spki" })).toEqual(
      caCert.publicKey.export({ format: "der", type: "spki" }),
    );
  });

  it("carries the CA extensions openssl expects (basicConstraints critical, keyCertSign, cRLSign, SKI)", async () => {
    const { stdout } = await run("openssl", ["x509", "-noout", "-text", "-in", pemFile("ca.pem", ca.certPem)]);
    expect(stdout).toMatch(/X509v3 Basic Constraints: critical\s+CA:TRUE/);
    expect(stdout).toMatch(/X509v3 Key Usage: critical\s+Certificate Sign, CRL Sign/);
    expect(stdout).toMatch(/X509v3 Subject Key Identifier:\s+[0-9A-F:]{59}/);
    expect(stdout).toContain("Signature Algorithm: ecdsa-with-SHA256");
  });

  it("keeps a cluster name with DN syntax characters intact", async () => {
    const odd = new x509.X509Certificate((await createClusterCa("a,b=c+d", "id")).certPem);
    expect(odd.subjectName.getField("CN")).toEqual(["keelson-ca-a,b=c+d"]);
  });
});

describe("signCertificate", () => {
  it("signs a client certificate that verifies against the CA and only the CA", async () => {
    const keys = await generateKeyPair();
    const before = Date.now();
    const { certPem } = await signCertificate(ca, {
      publicKey: keys.publicKey,
      subject: { commonName: "alice", organization: ["keelson:cluster-admins", "devs"] },
      usages: ["client"],
      validHours: 24,
    });
    const leaf = new X509Certificate(certPem);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(caCert)).toBe(true);
    expect(leaf.verify(caCert.publicKey)).toBe(true);
    expect(leaf.keyUsage).toEqual([CLIENT_AUTH]);
    expect(leaf.subject.split("\n")).toEqual(["CN=alice", "O=keelson:cluster-admins", "O=devs"]);
    // Backdated a few minutes for clock skew, then exactly validHours from now.
    const from = Date.parse(leaf.validFrom);
    expect(from).toBeLessThan(before - 60_000);
    expect(from).toBeGreaterThan(before - 10 * 60_000);
    expect(Math.abs(Date.parse(leaf.validTo) - (before + 24 * HOUR))).toBeLessThan(5_000);

    const stranger = new X509Certificate((await createClusterCa("elsewhere", "x")).certPem);
    expect(leaf.verify(stranger.publicKey)).toBe(false);

    const chain = await run("openssl", [
      "verify",
      "-purpose",
      "sslclient",
      "-CAfile",
      pemFile("ca-client.pem", ca.certPem),
      pemFile("client.pem", certPem),
    ]);
    expect(chain.stdout).toContain(": OK");
  });

  it("signs a server certificate with SANs and the CA's key id as authority key id", async () => {
    const keys = await generateKeyPair();
    const { certPem } = await signCertificate(ca, {
      publicKey: keys.publicKey,
      subject: { commonName: "kube-apiserver" },
      dnsNames: ["kubernetes.default.svc", "api.example.test"],
      ipAddresses: ["10.21.0.1", "fd00::1"],
      usages: ["server", "client"],
      validHours: 1,
    });
    const leaf = new X509Certificate(certPem);
    expect(leaf.keyUsage?.sort()).toEqual([SERVER_AUTH, CLIENT_AUTH].sort());
    expect(leaf.subjectAltName).toBe(
      "DNS:kubernetes.default.svc, DNS:api.example.test, IP Address:10.21.0.1, IP Address:FD00:0:0:0:0:0:0:1",
    );
    expect(leaf.checkHost("api.example.test")).toBe("api.example.test");
    expect(leaf.checkIP("10.21.0.1")).toBe("10.21.0.1");

    const parsed = new x509.X509Certificate(certPem);
    const aki = parsed.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId;
    const caSki = new x509.X509Certificate(ca.certPem).getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
    expect(aki).toMatch(/^[0-9a-f]{40}$/);
    expect(aki).toBe(caSki);

    const chain = await run("openssl", [
      "verify",
      "-purpose",
      "sslserver",
      "-CAfile",
      pemFile("ca-server.pem", ca.certPem),
      pemFile("server.pem", certPem),
    ]);
    expect(chain.stdout).toContain(": OK");
  });

  it("signs a CSR with the subject the caller chose, not the one the CSR asks for", async () => {
    const keys = await generateKeyPair();
    const csr = await x509.Pkcs10CertificateRequestGenerator.create(
      { name: "CN=someone-else, O=system:masters", keys, signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } },
      webCrypto,
    );
    const { certPem } = await signCertificate(ca, {
      csrPem: csr.toString("pem"),
      subject: { commonName: "system:node:worker-1", organization: ["system:nodes"] },
      usages: ["client"],
      validHours: 24,
    });
    const leaf = new X509Certificate(certPem);
    expect(leaf.subject.split("\n")).toEqual(["CN=system:node:worker-1", "O=system:nodes"]);
    expect(leaf.verify(caCert.publicKey)).toBe(true);
    // The certificate is for the CSR's key.
    const csrKey = createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: "der", type: "spki" });
    expect(leaf.publicKey.export({ format: "der", type: "spki" })).toEqual(
      csrKey.export({ format: "der", type: "spki" }),
    );
  });

  it("refuses a CSR whose signature does not match its key", async () => {
    const keys = await generateKeyPair();
    const other = await generateKeyPair();
    const csr = await x509.Pkcs10CertificateRequestGenerator.create(
      { name: "CN=x", keys, signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } },
      webCrypto,
    );
    // Same request body, signature from another key: a proof of possession that fails.
    const forged = await x509.Pkcs10CertificateRequestGenerator.create(
      {
        name: "CN=x",
        keys: { publicKey: keys.publicKey, privateKey: other.privateKey },
        signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
      },
      webCrypto,
    );
    expect(await csr.verify(webCrypto)).toBe(true);
    await expect(
      signCertificate(ca, {
        csrPem: forged.toString("pem"),
        subject: { commonName: "x" },
        usages: ["client"],
        validHours: 1,
      }),
    ).rejects.toThrow(/signature does not match/);
  });

  it("refuses malformed requests with a CertificateRequestError", async () => {
    const keys = await generateKeyPair();
    const base = {
      publicKey: keys.publicKey,
      subject: { commonName: "x" },
      usages: ["client" as const],
      validHours: 1,
    };
    const bad = [
      { ...base, publicKey: undefined },
      {
        ...base,
        publicKey: undefined,
        csrPem: "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----",
      },
      { ...base, validHours: 0 },
      { ...base, validHours: Number.NaN },
      { ...base, usages: [] },
      { ...base, subject: { commonName: "" } },
      { ...base, ipAddresses: ["10.0.0.256"] },
      { ...base, dnsNames: [" "] },
    ];
    for (const req of bad) {
      await expect(signCertificate(ca, req), JSON.stringify({ ...req, publicKey: undefined })).rejects.toBeInstanceOf(
        CertificateRequestError,
      );
    }
  });

  it("never lets a leaf outlive its CA", async () => {
    const keys = await generateKeyPair();
    const { certPem } = await signCertificate(ca, {
      publicKey: keys.publicKey,
      subject: { commonName: "long" },
      usages: ["client"],
      validHours: 24 * 365 * 50,
    });
    expect(new X509Certificate(certPem).validTo).toBe(caCert.validTo);
  });
});
