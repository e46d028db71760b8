import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import type { CertProfile } from "@keelson/protocol";
import { nthAddress, parseIpv4 } from "@keelson/protocol";
import { writeFileAtomic } from "../../services/atomic-file.ts";
import { CLUSTER_DOMAIN, type NodeConfig } from "../config.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { definePhase } from "./common.ts";
import { clusterRange } from "./net.ts";

/**
 * Generate certificates / send signing request. The node makes its own keys (they never leave
 * it) and CSRs with openssl; the cluster CA signs them (the control plane over the link, a test
 * CA in tests). A certificate that is present, unexpired, signed by the cluster CA, matching its
 * key and covering today's SANs is kept: restarts reuse certificates unless asked to regenerate.
 */

export interface CertRequest {
  profile: CertProfile;
  commonName: string;
  organization?: string;
  dns: string[];
  ips: string[];
}

/** Renew when less than this is left. */
const RENEW_BEFORE_MS = 60 * 60 * 1000;

export function certRequests(config: NodeConfig): CertRequest[] {
  const { nodeName, primaryIp, cluster } = config;
  const nodeDns = parseIpv4(nodeName) === undefined ? [nodeName] : [];
  const requests: CertRequest[] = [
    {
      profile: "kubelet",
      commonName: `system:node:${nodeName}`,
      organization: "system:nodes",
      dns: nodeDns,
      ips: [primaryIp],
    },
    { profile: "kube-proxy", commonName: "system:kube-proxy", dns: [], ips: [] },
  ];
  if (config.role !== "master") return requests;
  const serviceIp = nthAddress(clusterRange(cluster.servicesCidr, "servicesCidr"), 1);
  const apiDns = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    `kubernetes.default.svc.${CLUSTER_DOMAIN}`,
    "localhost",
    ...nodeDns,
    ...(cluster.externalDnsName ? [cluster.externalDnsName] : []),
  ];
  const apiIps = unique([primaryIp, "127.0.0.1", serviceIp, ...(cluster.masterVipIpv4 ? [cluster.masterVipIpv4] : [])]);
  requests.push(
    { profile: "apiserver", commonName: "kube-apiserver", dns: apiDns, ips: apiIps },
    {
      profile: "bouncer",
      commonName: "keelson-node-bouncer",
      dns: ["localhost"],
      ips: unique([primaryIp, "127.0.0.1"]),
    },
    {
      profile: "etcd-server",
      commonName: nodeName,
      dns: ["localhost", ...nodeDns],
      ips: unique([primaryIp, "127.0.0.1"]),
    },
    // etcd checks a peer's certificate against the address the connection comes from. Test
    // hosts that share one machine on 127.0.0.x connect out from 127.0.0.1, so it joins the SANs
    // there; hosts with a real primary IP connect from it.
    {
      profile: "etcd-peer",
      commonName: nodeName,
      dns: nodeDns,
      ips: isLoopback(primaryIp) ? unique([primaryIp, "127.0.0.1"]) : [primaryIp],
    },
    {
      profile: "etcd-client",
      commonName: "kube-apiserver-etcd-client",
      organization: "system:masters",
      dns: [],
      ips: [],
    },
    {
      profile: "apiserver-kubelet-client",
      commonName: "kube-apiserver-kubelet-client",
      organization: "system:masters",
      dns: [],
      ips: [],
    },
    // Client towards the API server and serving cert of the secure port (/healthz) in one.
    ...(["kube-controller-manager", "kube-scheduler"] as const).map((profile) => ({
      profile,
      commonName: `system:${profile}`,
      dns: ["localhost"],
      ips: unique([primaryIp, "127.0.0.1"]),
    })),
  );
  return requests;
}

/** Why a certificate cannot be reused, or undefined when it can. */
export function certificateProblem(ctx: PhaseContext, request: CertRequest): string | undefined {
  const { paths } = ctx;
  // The cluster's service-account key comes with the apiserver certificate: without it, ask again.
  if (request.profile === "apiserver" && !existsSync(paths.serviceAccountKey)) {
    return "apiserver: the cluster's service-account key has not been delivered";
  }
  // The certificates API's signing CA comes with the controller-manager's certificate.
  if (request.profile === "kube-controller-manager" && !existsSync(paths.clusterSigningKey)) {
    return "kube-controller-manager: the cluster's signing CA has not been delivered";
  }
  let cert: X509Certificate;
  let ca: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(paths.cert(request.profile)));
    ca = new X509Certificate(readFileSync(paths.caCert));
  } catch (err) {
    return `${request.profile}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "not issued yet" : (err as Error).message}`;
  }
  try {
    const key = createPrivateKey(readFileSync(paths.key(request.profile)));
    if (!cert.checkPrivateKey(key)) return `${request.profile}: the certificate does not match its key`;
  } catch (err) {
    return `${request.profile}: key unreadable (${(err as Error).message})`;
  }
  if (!cert.verify(ca.publicKey)) return `${request.profile}: not signed by the cluster CA in ${paths.caCert}`;
  if (Date.parse(cert.validTo) - Date.now() < RENEW_BEFORE_MS) return `${request.profile}: expires ${cert.validTo}`;
  const sans = new Set((cert.subjectAltName ?? "").split(", ").map((s) => s.replace(/^IP Address:/, "IP:")));
  const missing = [...request.dns.map((d) => `DNS:${d}`), ...request.ips.map((ip) => `IP:${ip}`)].filter(
    (san) => !sans.has(san),
  );
  if (missing.length > 0) return `${request.profile}: lacks SAN ${missing.join(", ")}`;
  return undefined;
}

async function issue(ctx: PhaseContext, request: CertRequest): Promise<void> {
  const { paths } = ctx;
  const openssl = "openssl";
  const keyFile = paths.key(request.profile);
  const csrFile = paths.csr(request.profile);
  mkdirSync(paths.pki, { recursive: true, mode: 0o700 });
  const key = await ctx.run(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
  writeFileAtomic(keyFile, key.stdout, 0o600);
  const subject = `/CN=${escapeRdn(request.commonName)}${request.organization ? `/O=${escapeRdn(request.organization)}` : ""}`;
  const sans = [...request.dns.map((d) => `DNS:${d}`), ...request.ips.map((ip) => `IP:${ip}`)];
  const csr = await ctx.run(openssl, [
    "req",
    "-new",
    "-key",
    keyFile,
    "-subj",
    subject,
    ...(sans.length > 0 ? ["-addext", `subjectAltName=${sans.join(",")}`] : []),
  ]);
  writeFileAtomic(csrFile, csr.stdout, 0o644);
  const signed = await ctx.signCsr(csr.stdout, request.profile, ctx.signal);
  // Check what came back before anything uses it: a signer that dropped a SAN or answered with
  // someone else's certificate fails here, naming the problem.
  writeFileAtomic(paths.cert(request.profile), ensureNewline(signed.certPem), 0o644);
  writeFileAtomic(paths.caCert, ensureNewline(signed.caPem), 0o644);
  if (request.profile === "apiserver") {
    if (!signed.serviceAccountKeyPem) {
      throw new PhaseError(
        "the control plane sent the apiserver certificate without the cluster's service-account key",
      );
    }
    const key = createPrivateKey(signed.serviceAccountKeyPem);
    const pub = createPublicKey(key).export({ type: "spki", format: "pem" }).toString();
    writeFileAtomic(paths.serviceAccountPub, pub, 0o644);
    writeFileAtomic(paths.serviceAccountKey, ensureNewline(signed.serviceAccountKeyPem), 0o600);
  }
  if (request.profile === "kube-controller-manager") {
    if (!signed.clusterSigning) {
      throw new PhaseError(
        "the control plane sent the kube-controller-manager certificate without the cluster's signing CA",
      );
    }
    writeFileAtomic(paths.clusterSigningCert, ensureNewline(signed.clusterSigning.certPem), 0o644);
    writeFileAtomic(paths.clusterSigningKey, ensureNewline(signed.clusterSigning.keyPem), 0o600);
  }
  const problem = certificateProblem(ctx, request);
  if (problem) throw new PhaseError(`the signed certificate is not usable: ${problem}`);
}

export const genCerts = definePhase({
  id: "gen-certs",
  async start(ctx) {
    const requests = certRequests(ctx.config);
    const toIssue = ctx.regenerateCerts ? requests : requests.filter((r) => certificateProblem(ctx, r) !== undefined);
    for (const request of toIssue) {
      ctx.log.info({ profile: request.profile }, "requesting certificate");
      await issue(ctx, request);
    }
    if (toIssue.length === 0) return { message: "certificates present and valid: reused, not regenerated" };
    return { message: `issued ${toIssue.map((r) => r.profile).join(", ")}` };
  },
  async stop() {
    // Certificates stay: a later start reuses them. Cleaning a detached node removes them.
    return undefined;
  },
  async status(ctx) {
    const problems = certRequests(ctx.config)
      .map((r) => certificateProblem(ctx, r))
      .filter((p): p is string => p !== undefined);
    if (problems.length > 0) throw new PhaseError(`certificates: ${problems.join("; ")}`);
    return undefined;
  },
});

function escapeRdn(value: string): string {
  return value.replace(/([/\\,+=])/g, "\\$1");
}

function ensureNewline(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}

function isLoopback(ip: string): boolean {
  return ip.startsWith("127.") || ip === "::1";
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
