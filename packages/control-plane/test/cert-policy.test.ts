import { randomUUID } from "node:crypto";
import { firstRow, nodePools, nodes } from "@keelson/db";
import * as x509 from "@peculiar/x509";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { decideCertificate } from "../src/domain/hosts/cert-policy.ts";
import { NodeCertificateSigner } from "../src/domain/hosts/cert-signer.ts";
import { generateKeyPair, webCrypto } from "../src/pki/keys.ts";
import { createTestApp } from "./helpers.ts";

async function csrFor(commonName: string): Promise<string> {
  const keys = await generateKeyPair();
  const request = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: [{ CN: [commonName] }], keys, signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } },
    webCrypto,
  );
  return request.toString("pem");
}

/** A host's name and address are its own report: another node's (or the VIP) must not be signed for it. */
describe("cert policy: names that belong to another node", () => {
  const worker = { hostId: "w", name: "worker-a", primaryIp: "10.0.0.7", isMaster: false };
  const cluster = {
    spec: { masterVipIpv4: "10.0.0.100" },
    otherNodes: [{ name: "master-a", primaryIp: "10.0.0.5" }],
  };
  const kubelet = (node: typeof worker, commonName: string, ipAddresses: string[] = []) =>
    decideCertificate(node, cluster, { profile: "kubelet", commonName, dnsNames: [], ipAddresses });

  it("signs the node's own name and address", () => {
    expect(kubelet(worker, "system:node:worker-a", ["10.0.0.7"])).toMatchObject({ ok: true });
    expect(kubelet(worker, "system:node:10.0.0.7")).toMatchObject({ ok: true });
  });

  it("refuses a host that reports another node's address as its own", () => {
    const impostor = { ...worker, primaryIp: "10.0.0.5" };
    expect(kubelet(impostor, "system:node:10.0.0.5")).toMatchObject({ ok: false });
    expect(kubelet(impostor, "system:node:worker-a", ["10.0.0.5"])).toMatchObject({ ok: false });
    // Its own host name still works.
    expect(kubelet(impostor, "system:node:worker-a")).toMatchObject({ ok: true });
  });

  it("signs the apiserver's kubelet-client identity for masters only, as system:masters", () => {
    const master = { hostId: "m", name: "master-b", primaryIp: "10.0.0.6", isMaster: true };
    const proposal = {
      profile: "apiserver-kubelet-client" as const,
      commonName: "kube-apiserver-kubelet-client",
      dnsNames: [],
      ipAddresses: [],
    };
    expect(decideCertificate(master, cluster, proposal)).toMatchObject({
      ok: true,
      subject: { commonName: "kube-apiserver-kubelet-client", organization: ["system:masters"] },
      usages: ["client"],
    });
    expect(decideCertificate(worker, cluster, proposal)).toMatchObject({ ok: false, reason: /masters only/ });
    expect(decideCertificate(master, cluster, { ...proposal, commonName: "admin" })).toMatchObject({ ok: false });
  });

  it("refuses a host registered under another node's host name", () => {
    const twin = { ...worker, name: "MASTER-A" };
    expect(kubelet(twin, "system:node:MASTER-A")).toMatchObject({ ok: false });
  });

  it("refuses the VIP to anything but the API server", () => {
    const onVip = { ...worker, primaryIp: "10.0.0.100" };
    expect(kubelet(onVip, "system:node:10.0.0.100")).toMatchObject({ ok: false });
    expect(kubelet(worker, "system:node:worker-a", ["10.0.0.100"])).toMatchObject({ ok: false });
    const master = { hostId: "m", name: "master-b", primaryIp: "10.0.0.6", isMaster: true };
    expect(
      decideCertificate(master, cluster, {
        profile: "apiserver",
        commonName: "kube-apiserver",
        dnsNames: [],
        ipAddresses: ["10.0.0.100", "10.0.0.6"],
      }),
    ).toMatchObject({ ok: true });
  });
});

describe("NodeCertificateSigner", () => {
  it("refuses a kubelet certificate for an address another node of the cluster has", async () => {
    const t = await createTestApp({ runOperations: false });
    const created = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name: "c" } });
    const clusterId = created.json().uuid as string;
    const pool = firstRow(
      await t.db.select({ id: nodePools.id }).from(nodePools).where(eq(nodePools.projectId, t.projectId)),
    )?.id as string;
    const addNode = async (name: string, primaryIp: string) => {
      const id = randomUUID();
      await t.db
        .insert(nodes)
        .values({ id, projectId: t.projectId, nodePoolId: pool, clusterId, name, primaryIp, status: "ok" });
      return id;
    };
    await addNode("master-a", "10.0.0.5");
    const impostor = await addNode("worker-a", "10.0.0.5");
    const signer = new NodeCertificateSigner(t.db, t.app.keelson.cipher);
    const ask = async (commonName: string) =>
      signer.sign(impostor, {
        type: "cert.sign",
        id: commonName,
        profile: "kubelet",
        csrPem: await csrFor(commonName),
        dnsNames: [],
        ipAddresses: [],
      });
    expect(await ask("system:node:10.0.0.5")).toMatchObject({ ok: false, error: { code: "REFUSED" } });
    expect(await ask("system:node:worker-a")).toMatchObject({ ok: true });
  });
});
