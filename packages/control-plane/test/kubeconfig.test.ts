import { execFile } from "node:child_process";
import { createHmac, createPrivateKey, createPublicKey, randomUUID, X509Certificate } from "node:crypto";
import { statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { clusterAccessTokens, clusters, firstRow, nodePools, nodes, tokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { ClusterSpec } from "../src/domain/clusters/spec/fields.ts";
import { hashSecret } from "../src/domain/identity/token-hash.ts";
import { verifyClusterAccessToken } from "../src/domain/kubeconfig/access-tokens.ts";
import { apiServerUrl } from "../src/domain/kubeconfig/endpoint.ts";
import { CLIENT_CERT_GROUP } from "../src/domain/kubeconfig/kubeconfig.ts";
import { issueWebCliToken, verifyWebCliToken, WEBCLI_TOKEN_TTL_SECONDS } from "../src/domain/webcli/tokens.ts";
import { createClusterCa } from "../src/pki/cluster-ca.ts";
import { generateKeyPair, privateKeyToPem } from "../src/pki/keys.ts";
import { signCertificate } from "../src/pki/sign.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const run = promisify(execFile);
const HOUR = 3_600_000;
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

let t: TestApp;
let tokenId: string;

interface TestCluster {
  id: string;
  name: string;
  caCertPem: string;
}

/** A cluster row as the lead's create writes it: spec JSON plus a real CA with its key encrypted. */
/** `spec` may be loose on purpose: the kubeconfig must cope with a row whatever wrote it. */
async function insertCluster(spec: Readonly<Record<string, unknown>>, projectId = t.projectId): Promise<TestCluster> {
  const id = randomUUID();
  const name = `c-${id.slice(0, 8)}`;
  const pool = firstRow(await t.db.select().from(nodePools).where(eq(nodePools.projectId, projectId)));
  if (!pool) throw new Error("the project has no local node pool");
  const ca = await createClusterCa(name, id);
  await t.db.insert(clusters).values({
    id,
    projectId,
    name,
    nodePoolId: pool.id,
    cloudProviderId: pool.cloudProviderId,
    kubeRoleVersion: "1.31.4-kls.1",
    spec: { name, ...spec } as ClusterSpec,
    caCertPem: ca.certPem,
    caKeyEnc: t.app.keelson.cipher.encrypt(ca.keyPem),
  });
  return { id, name, caCertPem: ca.certPem };
}

async function insertNode(clusterId: string, node: { ip: string; isMaster: 0 | 1; createdAt: string }): Promise<void> {
  const pool = firstRow(await t.db.select().from(nodePools).where(eq(nodePools.projectId, t.projectId)));
  await t.db.insert(nodes).values({
    id: randomUUID(),
    projectId: t.projectId,
    nodePoolId: pool?.id as string,
    clusterId,
    name: `host-${node.ip || "noip"}-${node.createdAt}`,
    primaryIp: node.ip,
    isMaster: node.isMaster,
    createdAt: node.createdAt,
  });
}

const kubeconfigUrl = (clusterId: string, query = "", version = "v4", projectId = t.projectId) =>
  `/${version}/${projectId}/kubeconfig/${clusterId}${query}`;

interface Kubeconfig {
  clusters: { name: string; cluster: { server: string; "certificate-authority-data": string } }[];
  users: { name: string; user: Record<string, string> }[];
  contexts: { name: string; context: { cluster: string; user: string } }[];
  "current-context": string;
}

function writeTemp(name: string, body: string): string {
  const file = join(t.dataDir, name);
  writeFileSync(file, body, { mode: 0o600 });
  return file;
}

/** What kubectl itself makes of the file (--raw keeps the secrets in the output). */
async function kubectlView(body: string): Promise<Kubeconfig> {
  const file = writeTemp(`kc-${randomUUID()}.yaml`, body);
  const { stdout } = await run("kubectl", ["config", "view", "--kubeconfig", file, "--raw", "-o", "json"], {
    env: { ...process.env, KUBECONFIG: "" },
  });
  return JSON.parse(stdout) as Kubeconfig;
}

async function getKubeconfig(clusterId: string, query = "", token?: string) {
  const res = await t.request({ method: "GET", url: kubeconfigUrl(clusterId, query), token });
  expect(res.statusCode, res.body).toBe(200);
  return { res, doc: parse(res.body) as Kubeconfig };
}

const b64decode = (s: string) => Buffer.from(s, "base64").toString("utf8");

beforeAll(async () => {
  t = await createTestApp();
  const row = firstRow(
    await t.db
      .select()
      .from(tokens)
      .where(eq(tokens.tokenHash, hashSecret(t.token))),
  );
  tokenId = row?.id as string;
});
afterAll(async () => t.close());

describe("GET kubeconfig", () => {
  it("returns a kubeconfig kubectl accepts, as an octet-stream attachment", async () => {
    const c = await insertCluster({ externalDnsName: "api.prod.example.test", k8sApiPort: "6443" });
    const { res, doc } = await getKubeconfig(c.id);
    expect(res.headers["content-type"]).toBe("application/octet-stream");
    expect(res.headers["content-disposition"]).toContain(`filename="${c.name}.yaml"`);

    const viewed = await kubectlView(res.body);
    expect(viewed["current-context"]).toBe(c.name);
    expect(viewed.clusters).toHaveLength(1);
    expect(viewed.clusters[0]?.name).toBe(c.name);
    expect(viewed.clusters[0]?.cluster.server).toBe("https://api.prod.example.test:6443");
    expect(b64decode(viewed.clusters[0]?.cluster["certificate-authority-data"] ?? "")).toBe(c.caCertPem);
    expect(viewed.contexts[0]?.context).toEqual({ cluster: c.name, user: doc.users[0]?.name });
    expect(viewed.users[0]?.user.token).toMatch(/^kct_/);
    expect(viewed.users[0]?.user["client-certificate-data"]).toBeUndefined();
  });

  it("picks the server: externalDnsName, else masterVipIpv4, else the first master's IP; k8sApiPort defaults to 443", async () => {
    const all = await insertCluster({ externalDnsName: "k.example.test", masterVipIpv4: "10.0.0.50" });
    await insertNode(all.id, { ip: "10.0.0.11", isMaster: 1, createdAt: "2024-01-01T00:00:00.000Z" });
    const vip = await insertCluster({ externalDnsName: "", masterVipIpv4: "10.0.0.50", k8sApiPort: "8443" });
    await insertNode(vip.id, { ip: "10.0.0.11", isMaster: 1, createdAt: "2024-01-01T00:00:00.000Z" });
    const masters = await insertCluster({ k8sApiPort: 6443 });
    // A master without an address yet and an earlier worker are skipped; the earliest master with an IP wins.
    await insertNode(masters.id, { ip: "", isMaster: 1, createdAt: "2024-01-01T00:00:00.000Z" });
    await insertNode(masters.id, { ip: "10.0.0.9", isMaster: 0, createdAt: "2024-01-02T00:00:00.000Z" });
    await insertNode(masters.id, { ip: "10.0.0.13", isMaster: 1, createdAt: "2024-01-04T00:00:00.000Z" });
    await insertNode(masters.id, { ip: "10.0.0.12", isMaster: 1, createdAt: "2024-01-03T00:00:00.000Z" });

    const server = async (id: string) => (await getKubeconfig(id)).doc.clusters[0]?.cluster.server;
    expect(await server(all.id)).toBe("https://k.example.test:443");
    expect(await server(vip.id)).toBe("https://10.0.0.50:8443");
    expect(await server(masters.id)).toBe("https://10.0.0.12:6443");
  });

  it("brackets an IPv6 master address in the URL", () => {
    expect(apiServerUrl({}, "fd00::10")).toBe("https://[fd00::10]:443");
    expect(apiServerUrl({}, undefined)).toBeUndefined();
  });

  it("answers 409 with a clear message while the cluster has no endpoint, and stores nothing", async () => {
    const c = await insertCluster({ externalDnsName: "", masterVipIpv4: "" });
    await insertNode(c.id, { ip: "10.0.0.20", isMaster: 0, createdAt: "2024-01-01T00:00:00.000Z" });
    for (const query of ["", "?force_cert_auth=true"]) {
      const res = await t.request({ method: "GET", url: kubeconfigUrl(c.id, query) });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual({
        code: "no_api_endpoint",
        message: `cluster ${c.name} has no API endpoint yet: set externalDnsName or masterVipIpv4, or attach a master`,
      });
    }
    expect(await t.db.select().from(clusterAccessTokens).where(eq(clusterAccessTokens.clusterId, c.id))).toEqual([]);
  });

  it("issues a bearer token stored only as a hash, verifiable for this cluster until certExpiryHrs", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.1.0.5", certExpiryHrs: 6 });
    const other = await insertCluster({ masterVipIpv4: "10.1.0.6" });
    const before = Date.now();
    const { doc } = await getKubeconfig(c.id);
    const token = doc.users[0]?.user.token as string;

    const rows = await t.db.select().from(clusterAccessTokens).where(eq(clusterAccessTokens.clusterId, c.id));
    expect(rows).toHaveLength(1);
    const row = rows[0] as (typeof rows)[number];
    expect(row.tokenHash).toBe(hashSecret(token));
    expect(JSON.stringify(row)).not.toContain(token);
    expect(row.projectId).toBe(t.projectId);
    expect(row.subject).toBe(tokenId);
    expect(Math.abs(Date.parse(row.expiresAt as string) - (before + 6 * HOUR))).toBeLessThan(5_000);

    expect(await verifyClusterAccessToken(t.db, c.id, token)).toBe(tokenId);
    expect(await verifyClusterAccessToken(t.db, other.id, token)).toBeNull();
    expect(await verifyClusterAccessToken(t.db, c.id, `${token}x`)).toBeNull();
    expect(await verifyClusterAccessToken(t.db, c.id, token, new Date(before + 6 * HOUR + 10_000))).toBeNull();
    expect(await verifyClusterAccessToken(t.db, c.id, token, new Date(before + 5 * HOUR))).toBe(tokenId);
    // It opens the cluster's Kubernetes API, never this API.
    const res = await t.request({ method: "GET", url: kubeconfigUrl(c.id), token });
    expect(res.statusCode).toBe(403);
  });

  it("with force_cert_auth=true embeds a fresh client certificate signed by the cluster CA for certExpiryHrs", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.2.0.5", certExpiryHrs: 48 });
    const before = Date.now();
    const { res } = await getKubeconfig(c.id, "?force_cert_auth=true");
    const viewed = await kubectlView(res.body);
    const user = viewed.users[0]?.user ?? {};
    expect(user.token).toBeUndefined();

    const cert = new X509Certificate(b64decode(user["client-certificate-data"] as string));
    const ca = new X509Certificate(c.caCertPem);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkIssued(ca)).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.keyUsage).toEqual([CLIENT_AUTH]);
    expect(cert.subject.split("\n")).toEqual([`CN=${tokenId}`, `O=${CLIENT_CERT_GROUP}`]);
    expect(Math.abs(Date.parse(cert.validTo) - (before + 48 * HOUR))).toBeLessThan(5_000);
    expect(Date.parse(cert.validFrom)).toBeLessThanOrEqual(before);

    const key = createPrivateKey(b64decode(user["client-key-data"] as string));
    expect(createPublicKey(key).export({ format: "der", type: "spki" })).toEqual(
      cert.publicKey.export({ format: "der", type: "spki" }),
    );
    // No bearer token was minted for a certificate kubeconfig.
    expect(await t.db.select().from(clusterAccessTokens).where(eq(clusterAccessTokens.clusterId, c.id))).toEqual([]);

    // Every download gets its own key pair.
    const again = parse((await getKubeconfig(c.id, "?force_cert_auth=true")).res.body) as Kubeconfig;
    expect(again.users[0]?.user["client-key-data"]).not.toBe(user["client-key-data"]);
  });

  it("serves v3 and the /qbert prefix the same way, and names the admin as subject", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.3.0.5" });
    const v3 = await t.request({ method: "GET", url: kubeconfigUrl(c.id, "", "v3") });
    expect(v3.statusCode).toBe(200);
    expect((parse(v3.body) as Kubeconfig).clusters[0]?.cluster.server).toBe("https://10.3.0.5:443");
    const qbert = await t.request({
      method: "GET",
      url: `/qbert${kubeconfigUrl(c.id, "?force_cert_auth=false", "v3")}`,
    });
    expect(qbert.statusCode).toBe(200);

    const admin = await t.request({
      method: "GET",
      url: kubeconfigUrl(c.id, "?force_cert_auth=true"),
      token: ADMIN_TOKEN,
    });
    const cert = new X509Certificate(
      b64decode((parse(admin.body) as Kubeconfig).users[0]?.user["client-certificate-data"] ?? ""),
    );
    expect(cert.subject.split("\n")[0]).toBe("CN=admin");
  });

  it("answers 403 without a token or with another project's token, 404 for an unknown or foreign cluster", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.4.0.5" });
    for (const version of ["v4", "v3"]) {
      const none = await t.request({ method: "GET", url: kubeconfigUrl(c.id, "", version), token: null });
      expect(none.statusCode).toBe(403);
      expect(none.json().code).toBe("forbidden");
      const foreign = await t.request({ method: "GET", url: kubeconfigUrl(c.id, "", version), token: t.otherToken });
      expect(foreign.statusCode).toBe(403);
      const unknown = await t.request({ method: "GET", url: kubeconfigUrl(randomUUID(), "", version) });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().code).toBe("not_found");
    }
    // The admin sees every project, but a cluster is only found under its own project.
    const otherCluster = await insertCluster({ masterVipIpv4: "10.4.0.6" }, t.otherProjectId);
    const wrongPath = await t.request({ method: "GET", url: kubeconfigUrl(otherCluster.id), token: ADMIN_TOKEN });
    expect(wrongPath.statusCode).toBe(404);
    const rightPath = await t.request({
      method: "GET",
      url: kubeconfigUrl(otherCluster.id, "", "v4", t.otherProjectId),
      token: t.otherToken,
    });
    expect(rightPath.statusCode).toBe(200);
  });

  it("answers 400 naming force_cert_auth for a value that is not a boolean", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.5.0.5" });
    const res = await t.request({ method: "GET", url: kubeconfigUrl(c.id, "?force_cert_auth=maybe") });
    expect(res.statusCode).toBe(400);
    expect(res.json().field).toBe("force_cert_auth");
    expect(await t.db.select().from(clusterAccessTokens).where(eq(clusterAccessTokens.clusterId, c.id))).toEqual([]);
  });
});

describe("OpenAPI", () => {
  it("documents both routes in both versions, the kubeconfig as an octet-stream", async () => {
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
    for (const version of ["v4", "v3"]) {
      const get = doc.paths[`/${version}/{project_uuid}/kubeconfig/{cluster_uuid}`]?.get;
      expect(Object.keys(get?.responses?.["200"]?.content ?? {})).toEqual(["application/octet-stream"]);
      expect(get?.parameters?.map((p: { name: string }) => p.name)).toContain("force_cert_auth");
      expect(doc.paths[`/${version}/{project_uuid}/webcli/{uuid}`]?.post?.responses?.["200"]).toBeDefined();
    }
  });
});

describe("kubeconfig against a TLS endpoint serving the cluster CA", () => {
  let server: Server;
  let port: number;
  let cluster: TestCluster;

  beforeAll(async () => {
    // A stand-in for the node bouncer in front of the API server: serves a certificate of the
    // cluster CA and accepts the kubeconfig's token or client certificate.
    cluster = await insertCluster({ masterVipIpv4: "127.0.0.1" });
    const row = firstRow(await t.db.select().from(clusters).where(eq(clusters.id, cluster.id)));
    const ca = { certPem: cluster.caCertPem, keyPem: t.app.keelson.cipher.decrypt(row?.caKeyEnc as string) };
    const keys = await generateKeyPair();
    const serving = await signCertificate(ca, {
      publicKey: keys.publicKey,
      subject: { commonName: "kube-apiserver" },
      ipAddresses: ["127.0.0.1"],
      usages: ["server"],
      validHours: 1,
    });
    server = createServer(
      {
        cert: serving.certPem,
        key: await privateKeyToPem(keys.privateKey),
        ca: cluster.caCertPem,
        requestCert: true,
        rejectUnauthorized: false,
      },
      async (req, res) => {
        const socket = req.socket as import("node:tls").TLSSocket;
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
        const user = socket.authorized
          ? socket.getPeerCertificate().subject.CN
          : bearer
            ? await verifyClusterAccessToken(t.db, cluster.id, bearer)
            : null;
        res.writeHead(user ? 200 : 401, { "content-type": "application/json" });
        res.end(JSON.stringify(user ? { user } : { message: "Unauthorized" }));
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
    await t.db
      .update(clusters)
      .set({ spec: { ...(row?.spec as ClusterSpec), k8sApiPort: String(port) } })
      .where(eq(clusters.id, cluster.id));
  });
  afterAll(async () => new Promise<void>((resolve) => server.close(() => resolve())));

  async function kubectlRaw(body: string): Promise<unknown> {
    const file = writeTemp(`kc-${randomUUID()}.yaml`, body);
    const { stdout } = await run("kubectl", ["--kubeconfig", file, "get", "--raw", "/whoami"], {
      env: { ...process.env, KUBECONFIG: "" },
    });
    return JSON.parse(stdout);
  }

  it("kubectl trusts the server through the CA and authenticates with the bearer token", async () => {
    const { res } = await getKubeconfig(cluster.id);
    expect(await kubectlRaw(res.body)).toEqual({ user: tokenId });
  });

  it("kubectl authenticates with the client certificate", async () => {
    const { res } = await getKubeconfig(cluster.id, "?force_cert_auth=true", ADMIN_TOKEN);
    expect(await kubectlRaw(res.body)).toEqual({ user: "admin" });
  });
});

describe("POST webcli", () => {
  const webcliUrl = (clusterId: string, version = "v4", projectId = t.projectId) =>
    `/${version}/${projectId}/webcli/${clusterId}`;

  it("returns a signed token bound to project and cluster, valid ten minutes", async () => {
    const c = await insertCluster({});
    for (const version of ["v4", "v3"]) {
      const before = Math.floor(Date.now() / 1000);
      const res = await t.request({ method: "POST", url: webcliUrl(c.id, version) });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(Object.keys(body)).toEqual(["token"]);
      expect(body.token).toMatch(/^kwc1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
      const claims = verifyWebCliToken(t.dataDir, body.token);
      expect(claims).toMatchObject({ projectId: t.projectId, clusterId: c.id, subject: tokenId });
      expect(claims?.exp).toBe((claims?.iat ?? 0) + WEBCLI_TOKEN_TTL_SECONDS);
      expect(claims?.iat).toBeGreaterThanOrEqual(before);
    }
    // The key lives in the data dir, readable by the owner only.
    expect(statSync(join(t.dataDir, "webcli.key")).mode & 0o777).toBe(0o600);
  });

  it("gives each session its own token id", async () => {
    const c = await insertCluster({});
    const a = verifyWebCliToken(t.dataDir, (await t.request({ method: "POST", url: webcliUrl(c.id) })).json().token);
    const b = verifyWebCliToken(t.dataDir, (await t.request({ method: "POST", url: webcliUrl(c.id) })).json().token);
    expect(a?.jti).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(a?.jti).not.toBe(b?.jti);
  });

  it("rejects tampered, foreign-key, malformed and expired tokens", async () => {
    const c = await insertCluster({});
    const token: string = (await t.request({ method: "POST", url: webcliUrl(c.id) })).json().token;
    const [version, payload, mac] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    const otherCluster = Buffer.from(JSON.stringify({ ...claims, clusterId: randomUUID() })).toString("base64url");
    const flip = (s: string) => s.slice(0, -1) + (s.endsWith("A") ? "B" : "A");

    expect(verifyWebCliToken(t.dataDir, token)).not.toBeNull();
    expect(verifyWebCliToken(t.dataDir, `${version}.${otherCluster}.${mac}`)).toBeNull();
    expect(verifyWebCliToken(t.dataDir, `${version}.${payload}.${flip(mac)}`)).toBeNull();
    expect(verifyWebCliToken(t.dataDir, `kwc2.${payload}.${mac}`)).toBeNull();
    expect(verifyWebCliToken(t.dataDir, `${token}.x`)).toBeNull();
    expect(verifyWebCliToken(t.dataDir, "")).toBeNull();
    expect(verifyWebCliToken(Buffer.alloc(32, 1), token)).toBeNull();

    const expiry = (claims.exp as number) * 1000;
    expect(verifyWebCliToken(t.dataDir, token, new Date(expiry - 1000))).not.toBeNull();
    expect(verifyWebCliToken(t.dataDir, token, new Date(expiry))).toBeNull();
    expect(verifyWebCliToken(t.dataDir, token, new Date(Date.now() + 11 * 60_000))).toBeNull();

    // Correctly signed with a given key: accepted; a signed payload that is not a claim set: refused.
    const key = Buffer.alloc(32, 2);
    const good = issueWebCliToken(key, { projectId: "p", clusterId: "c", subject: "s" }).token;
    expect(verifyWebCliToken(key, good)?.clusterId).toBe("c");
    const junk = `kwc1.${Buffer.from(JSON.stringify({ clusterId: "c", exp: "never" })).toString("base64url")}`;
    expect(verifyWebCliToken(key, `${junk}.${createHmac("sha256", key).update(junk).digest("base64url")}`)).toBeNull();
  });

  it("is not usable as an X-Auth-Token", async () => {
    const c = await insertCluster({ masterVipIpv4: "10.6.0.5" });
    const token: string = (await t.request({ method: "POST", url: webcliUrl(c.id) })).json().token;
    for (const req of [
      { method: "GET" as const, url: kubeconfigUrl(c.id) },
      { method: "POST" as const, url: webcliUrl(c.id) },
    ]) {
      const res = await t.request({ ...req, token });
      expect(res.statusCode).toBe(403);
      expect(res.json().code).toBe("forbidden");
    }
  });

  it("answers 403 without a token or with another project's token, 404 for an unknown cluster", async () => {
    const c = await insertCluster({});
    for (const version of ["v4", "v3"]) {
      expect((await t.request({ method: "POST", url: webcliUrl(c.id, version), token: null })).statusCode).toBe(403);
      expect((await t.request({ method: "POST", url: webcliUrl(c.id, version), token: t.otherToken })).statusCode).toBe(
        403,
      );
      const unknown = await t.request({ method: "POST", url: webcliUrl(randomUUID(), version) });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().code).toBe("not_found");
    }
  });
});

describe("revoking the credential a kubeconfig was issued to", () => {
  const bearerOf = (yaml: string) => (parse(yaml) as Kubeconfig).users[0]?.user.token as string;

  it("revokes the kubeconfig tokens a project token minted when the token is revoked", async () => {
    const c = await insertCluster({ externalDnsName: "api.revoke.example.test" });
    const minted = (
      await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/tokens`, token: ADMIN_TOKEN })
    ).json();
    const { res } = await getKubeconfig(c.id, "", minted.token);
    const bearer = bearerOf(res.body);
    const { res: kept } = await getKubeconfig(c.id);
    expect(await verifyClusterAccessToken(t.db, c.id, bearer)).toBe(minted.id);

    const revoked = await t.request({
      method: "DELETE",
      url: `/v1/projects/${t.projectId}/tokens/${minted.id}`,
      token: ADMIN_TOKEN,
    });
    expect(revoked.statusCode).toBe(200);
    expect(await verifyClusterAccessToken(t.db, c.id, bearer)).toBeNull();
    // Kubeconfigs of other credentials are untouched.
    expect(await verifyClusterAccessToken(t.db, c.id, bearerOf(kept.body))).toBe(tokenId);
  });

  it("revokes a user's kubeconfig tokens when the user is deleted", async () => {
    const c = await insertCluster({ externalDnsName: "api.revoke-user.example.test" });
    const user = (
      await t.request({
        method: "POST",
        url: `/v1/projects/${t.projectId}/users`,
        token: ADMIN_TOKEN,
        payload: { name: "kube-user", password: "a-long-password" },
      })
    ).json();
    const login = await t.request({
      method: "POST",
      url: "/keystone/v3/auth/tokens",
      token: null,
      payload: {
        auth: {
          identity: { methods: ["password"], password: { user: { name: "kube-user", password: "a-long-password" } } },
          scope: { project: { id: t.projectId } },
        },
      },
    });
    expect(login.statusCode, login.body).toBe(201);
    const { res } = await getKubeconfig(c.id, "", login.headers["x-subject-token"] as string);
    const bearer = bearerOf(res.body);
    expect(await verifyClusterAccessToken(t.db, c.id, bearer)).toBe(user.id);

    const deleted = await t.request({
      method: "DELETE",
      url: `/v1/projects/${t.projectId}/users/${user.id}`,
      token: ADMIN_TOKEN,
    });
    expect(deleted.statusCode).toBe(200);
    expect(await verifyClusterAccessToken(t.db, c.id, bearer)).toBeNull();
  });
});
