import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Certificates for tests that talk to a (stand-in) Kubernetes API with real clients, made with
 * the real openssl: a CA, and client or server certificates it signs, including one whose
 * validity ended yesterday (`openssl ca` takes explicit dates; `x509 -req` of OpenSSL 3.0 does not).
 */

export interface PemPair {
  cert: string;
  key: string;
}

export interface IssueOptions {
  cn: string;
  /** Kubernetes groups (O). */
  groups?: string[];
  /** Server certificate for these IP addresses. */
  ips?: string[];
  /** Validity already over. */
  expired?: boolean;
}

function openssl(args: string[], input?: string): string {
  return execFileSync("openssl", args, { encoding: "utf8", input, stdio: ["pipe", "pipe", "pipe"] });
}

function ecKey(): string {
  return openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
}

export function makeCa(dir: string, cn = "test-cluster-ca"): PemPair & { certFile: string; keyFile: string } {
  mkdirSync(dir, { recursive: true });
  const key = ecKey();
  const keyFile = join(dir, "ca.key");
  const certFile = join(dir, "ca.crt");
  writeFileSync(keyFile, key, { mode: 0o600 });
  openssl(["req", "-x509", "-new", "-key", keyFile, "-subj", `/CN=${cn}`, "-days", "2", "-out", certFile]);
  return { cert: readFileSync(certFile, "utf8"), key, certFile, keyFile };
}

let serial = 1;

/** A certificate signed by the CA whose files are `ca` (writes its working files under `dir`). */
export function issue(dir: string, ca: { certFile: string; keyFile: string }, options: IssueOptions): PemPair {
  const name = `${options.cn.replace(/[^A-Za-z0-9]/g, "_")}-${serial++}`;
  const work = join(dir, name);
  mkdirSync(work, { recursive: true });
  const key = ecKey();
  const keyFile = join(work, "key.pem");
  writeFileSync(keyFile, key, { mode: 0o600 });
  const subject = `/CN=${options.cn}${(options.groups ?? []).map((g) => `/O=${g}`).join("")}`;
  const csr = openssl(["req", "-new", "-key", keyFile, "-subj", subject]);
  const csrFile = join(work, "req.csr");
  writeFileSync(csrFile, csr);
  const ext = join(work, "ext.cnf");
  writeFileSync(
    ext,
    [
      "[ca]",
      "default_ca = own",
      "[own]",
      `database = ${join(work, "index.txt")}`,
      `new_certs_dir = ${work}`,
      `serial = ${join(work, "serial")}`,
      "default_md = sha256",
      "policy = any",
      "copy_extensions = none",
      "x509_extensions = usage",
      "[any]",
      "commonName = supplied",
      "organizationName = optional",
      "[usage]",
      "basicConstraints = critical,CA:FALSE",
      "keyUsage = critical,digitalSignature,keyEncipherment",
      options.ips ? "extendedKeyUsage = serverAuth" : "extendedKeyUsage = clientAuth",
      ...(options.ips ? [`subjectAltName = ${options.ips.map((ip) => `IP:${ip}`).join(",")}`] : []),
      "",
    ].join("\n"),
  );
  writeFileSync(join(work, "index.txt"), "");
  writeFileSync(join(work, "serial"), `${String(serial).padStart(4, "0")}\n`);
  const day = 86_400_000;
  const stamp = (d: Date) => `${d.toISOString().replace(/[-:T]/g, "").slice(0, 14)}Z`;
  const now = Date.now();
  const [from, to] = options.expired ? [now - 3 * day, now - day] : [now - 60_000, now + day];
  const certFile = join(work, "cert.pem");
  openssl([
    "ca",
    "-batch",
    "-notext",
    "-config",
    ext,
    "-cert",
    ca.certFile,
    "-keyfile",
    ca.keyFile,
    "-in",
    csrFile,
    "-out",
    certFile,
    "-startdate",
    stamp(new Date(from)),
    "-enddate",
    stamp(new Date(to)),
    "-preserveDN",
  ]);
  return { cert: readFileSync(certFile, "utf8"), key };
}

/** A kubeconfig (YAML is a superset of JSON) for kubectl with the credential inline. */
export function kubeconfig(
  server: string,
  caPem: string,
  user: { token: string } | { cert: string; key: string },
): string {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const credential =
    "token" in user
      ? { token: user.token }
      : { "client-certificate-data": b64(user.cert), "client-key-data": b64(user.key) };
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server, "certificate-authority-data": b64(caPem) } }],
    users: [{ name: "u", user: credential }],
    contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
    "current-context": "c",
  });
}
