import { join } from "node:path";
import { type ClusterCa, createSelfSignedCa } from "../pki/cluster-ca.ts";
import { readIfExists, writeFileAtomic } from "../storage/data-dir-files.ts";

/** Where `auto` keeps its CA and server certificate, under the data dir. Keys are 0600. */
export const TLS_DIR = "tls";
export const CA_CERT_FILE = "ca.crt";
const CA_KEY_FILE = "ca.key";
/** A rotation's next CA (ca.crt, ca.key), made with KEELSON_TLS_NEXT_CA, and the CA it replaced. */
export const NEXT_CA_DIR = "next";
export const PREVIOUS_CA_FILE = "previous-ca.crt";

/** Where the CA of KEELSON_TLS=auto comes from: the data dir's files (SQLite), or the database (replicas). */
export type CaSource = () => Promise<ClusterCa>;

/** A new control-plane CA. PEM text ends with a newline (so `cat a.crt b.crt` is a valid bundle). */
export async function newControlPlaneCa(): Promise<ClusterCa> {
  const made = await createSelfSignedCa([{ CN: ["keelson-control-plane-ca"] }, { O: ["keelson"] }]);
  return { certPem: `${made.certPem.trim()}\n`, keyPem: `${made.keyPem.trim()}\n` };
}

/** A CA's two files in `dir` (ca.crt 0644, ca.key 0600). */
export function caFiles(dir: string): { where: string; read(): ClusterCa | undefined; write(ca: ClusterCa): void } {
  return {
    where: join(dir, CA_CERT_FILE),
    read() {
      const certPem = readIfExists(join(dir, CA_CERT_FILE));
      const keyPem = readIfExists(join(dir, CA_KEY_FILE));
      return certPem && keyPem ? { certPem, keyPem } : undefined;
    },
    write(ca) {
      // The key first: a certificate on disk means both are complete.
      writeFileAtomic(join(dir, CA_KEY_FILE), ca.keyPem, 0o600);
      writeFileAtomic(join(dir, CA_CERT_FILE), ca.certPem, 0o644);
    },
  };
}

/** The data dir's CA in `dir`, made at first start. */
export async function ensureCa(dir: string): Promise<ClusterCa> {
  const files = caFiles(dir);
  const kept = files.read();
  if (kept) return kept;
  const ca = await newControlPlaneCa();
  files.write(ca);
  return ca;
}
