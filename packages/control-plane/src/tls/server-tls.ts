import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Server as TlsServer } from "node:tls";
import { caCertHash, isCaCertificate, splitPemCertificates } from "@keelson/protocol";
import { SettingsError } from "@keelson/settings";
import type { FastifyBaseLogger } from "fastify";
import type { ClusterCa } from "../pki/cluster-ca.ts";
import { generateKeyPair, privateKeyToPem } from "../pki/keys.ts";
import { signCertificate } from "../pki/sign.ts";
import type { ServerSettings } from "../settings.ts";
import { readIfExists, writeFileAtomic } from "../storage/data-dir-files.ts";
import { type CaSource, ensureCa, NEXT_CA_DIR, PREVIOUS_CA_FILE, TLS_DIR } from "./ca-files.ts";
import { type ServerNames, serverNames } from "./names.ts";

/** The server's side of TLS, for https.createServer and for `setSecureContext` on a renewal. */
export interface SecureContextOptions {
  key: string;
  cert: string;
  minVersion: "TLSv1.2";
}

/** HTTPS of a running control plane (KEELSON_TLS=auto or files). */
export interface ServerTls {
  readonly mode: "auto" | "files";
  /** The key and certificate served now. */
  context(): SecureContextOptions;
  /** The CA certificates clients should trust (GET /v1/ca); undefined when files gave none. */
  readonly caBundlePem: string | undefined;
  /** `sha256:<hex>` of the root CA's public key (join-token answers, KEELSON_CA_HASH). */
  readonly caCertHash: string | undefined;
  /** Renews (auto) or re-reads (files) the certificate on a timer, swapping it into `server` in place. */
  keepFresh(server: TlsServer, log: FastifyBaseLogger): () => void;
}

const SERVER_CERT_FILE = "server.crt";
const SERVER_KEY_FILE = "server.key";

const HOUR_MS = 3_600_000;

/** The CAs the replicas share in the database (secrets/server-secrets.ts): current and a rotation's next. */
export interface SharedCas {
  tlsCa?: CaSource | undefined;
  tlsNextCa?: CaSource | undefined;
}

/**
 * The TLS side of the server for `settings.tlsMode`; undefined for `off`. `shared`: the CAs the
 * replicas share; without them `auto` uses the data dir's `tls/` CAs.
 */
export async function prepareServerTls(
  settings: ServerSettings,
  shared: SharedCas = {},
): Promise<ServerTls | undefined> {
  if (settings.tlsMode === "off") return undefined;
  if (settings.tlsMode === "files") return filesTls(settings);
  return autoTls(settings, shared);
}

/** One way to say how often a certificate is looked at: hourly, or every tenth of a short lifetime. */
function checkEveryMs(validHours: number): number {
  return Math.max(1_000, Math.min(HOUR_MS, (validHours * HOUR_MS) / 10));
}

async function autoTls(settings: ServerSettings, shared: SharedCas): Promise<ServerTls> {
  const dir = join(settings.dataDir, TLS_DIR);
  const ca = shared.tlsCa ? await shared.tlsCa() : await ensureCa(dir);
  // A CA rotation (README "Rotating the CA"): the next CA is made and served before it signs,
  // the previous one is served until the operator removes it, so agents trust both meanwhile.
  const nextCa = shared.tlsNextCa ?? (() => ensureCa(join(dir, NEXT_CA_DIR)));
  const next = settings.tlsNextCa ? await nextCa() : undefined;
  const previous = readIfExists(join(dir, PREVIOUS_CA_FILE));
  const names = serverNames(settings);
  const validMs = settings.tlsCertValidHours * HOUR_MS;
  const dueForRenewal = (certPem: string) =>
    Date.parse(new X509Certificate(certPem).validTo) - Date.now() < validMs / 3;

  let current = readServerCert(dir, ca, names);
  // A certificate kept from the last start is used as it is: nothing is written on a start that needs nothing.
  if (!current || dueForRenewal(current.cert))
    current = await issueServerCert(dir, ca, names, settings.tlsCertValidHours);

  return {
    mode: "auto",
    context: () => current as SecureContextOptions,
    caBundlePem: [ca.certPem, next?.certPem, previous]
      .filter((pem) => pem)
      .map((pem) => `${pem?.trim()}\n`)
      .join(""),
    caCertHash: caCertHash(ca.certPem),
    keepFresh(server, log) {
      let busy = false;
      const timer = setInterval(async () => {
        if (busy || !current || !dueForRenewal(current.cert)) return;
        busy = true;
        try {
          const renewed = await issueServerCert(dir, ca, names, settings.tlsCertValidHours);
          // New handshakes get the new certificate; connections already open keep theirs.
          server.setSecureContext(renewed);
          current = renewed;
          log.info({ validTo: new X509Certificate(renewed.cert).validTo }, "server certificate renewed");
        } catch (err) {
          log.error({ err }, "renewing the server certificate failed; trying again at the next check");
        } finally {
          busy = false;
        }
      }, checkEveryMs(settings.tlsCertValidHours));
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

/** The server certificate kept in the data dir, if it is still this CA's and names all of `names`. */
function readServerCert(dir: string, ca: ClusterCa, names: ServerNames): SecureContextOptions | undefined {
  const cert = readIfExists(join(dir, SERVER_CERT_FILE));
  const key = readIfExists(join(dir, SERVER_KEY_FILE));
  if (!cert || !key) return undefined;
  try {
    const x = new X509Certificate(cert);
    if (!x.verify(new X509Certificate(ca.certPem).publicKey)) return undefined;
    if (!names.dnsNames.every((n) => x.checkHost(n, { wildcards: false }) === n)) return undefined;
    if (!names.ipAddresses.every((ip) => x.checkIP(ip) === ip)) return undefined;
  } catch {
    return undefined;
  }
  return { key, cert, minVersion: "TLSv1.2" };
}

async function issueServerCert(
  dir: string,
  ca: ClusterCa,
  names: ServerNames,
  validHours: number,
): Promise<SecureContextOptions> {
  const keys = await generateKeyPair();
  const { certPem } = await signCertificate(ca, {
    publicKey: keys.publicKey,
    subject: { commonName: names.dnsNames[0] ?? names.ipAddresses[0] ?? "keelson-control-plane" },
    dnsNames: names.dnsNames,
    ipAddresses: names.ipAddresses,
    usages: ["server"],
    validHours,
  });
  const key = await privateKeyToPem(keys.privateKey);
  writeFileAtomic(join(dir, SERVER_KEY_FILE), key, 0o600);
  writeFileAtomic(join(dir, SERVER_CERT_FILE), certPem, 0o644);
  return { key, cert: certPem, minVersion: "TLSv1.2" };
}

function filesTls(settings: ServerSettings): ServerTls {
  const read = (): SecureContextOptions & { caCerts: string[] } => {
    const file = (path: string | undefined) => {
      if (!path) return "";
      try {
        return readFileSync(path, "utf8");
      } catch (err) {
        throw new SettingsError(`cannot read ${path}: ${(err as Error).message}`);
      }
    };
    const cert = file(settings.tlsCertFile);
    const chain = file(settings.tlsChainFile);
    const key = file(settings.tlsKeyFile);
    if (splitPemCertificates(cert).length === 0) {
      throw new SettingsError(`KEELSON_TLS_CERT_FILE ${settings.tlsCertFile} holds no PEM certificate`);
    }
    const caCerts = splitPemCertificates(`${cert}\n${chain}`).filter(isCaCertificate);
    return { key, cert: `${cert.trim()}\n${chain.trim()}\n`, minVersion: "TLSv1.2", caCerts };
  };
  let current = read();
  const root = current.caCerts.at(-1);
  return {
    mode: "files",
    context: () => ({ key: current.key, cert: current.cert, minVersion: current.minVersion }),
    caBundlePem: current.caCerts.length > 0 ? current.caCerts.join("") : undefined,
    caCertHash: root ? caCertHash(root) : undefined,
    keepFresh(server, log) {
      // The operator's renewal (certbot and the like) replaces the files: pick them up in place.
      const timer = setInterval(() => {
        try {
          const next = read();
          if (next.cert === current.cert && next.key === current.key) return;
          server.setSecureContext({ key: next.key, cert: next.cert, minVersion: next.minVersion });
          current = next;
          log.info("server certificate files changed; now serving them");
        } catch (err) {
          log.error({ err }, "re-reading the certificate files failed; still serving the previous ones");
        }
      }, HOUR_MS);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
