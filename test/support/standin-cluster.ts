import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import https from "node:https";
import { dirname, join } from "node:path";
import { issue, type makeCa, type PemPair } from "./kube-pki.ts";

/**
 * The test node package's stand-ins run as processes for tests on loopback: the stand-in
 * kube-apiserver with a `system:masters` identity to write objects, and the processes a test
 * starts, each ended by stopAll() (the test's afterAll).
 */

export const FIXTURE = join(import.meta.dirname, "..", "fixtures", "node-package");

export function processes() {
  const children: ChildProcess[] = [];
  /** Starts a stand-in binary; its stdout and stderr gather in the returned `text`. */
  function start(binary: string, args: string[]) {
    const child = spawn(join(FIXTURE, "bin", binary), args, {
      env: { PATH: process.env.PATH ?? "", KEELSON_NODE_BIN: process.execPath },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    const out = { text: "", stdout: "", stderr: "", child };
    child.stdout?.on("data", (c) => {
      out.text += c;
      out.stdout += c;
    });
    child.stderr?.on("data", (c) => {
      out.text += c;
      out.stderr += c;
    });
    return out;
  }
  const stopAll = () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
  };
  return { start, stopAll };
}

/** Polls `probe` every 100 ms until it answers something other than undefined. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe().catch(() => undefined);
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Writes a file (mode 0600), creating its directory. */
export function writeSecret(path: string, text: string) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** One HTTPS request to the API with a client certificate; the answer's status and body text. */
export function kubeCall(ca: string, user: PemPair | undefined, method: string, url: string, body?: unknown) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = https.request(
      url,
      {
        method,
        ca,
        cert: user?.cert,
        key: user?.key,
        headers: body === undefined ? {} : { "content-type": "application/json" },
      },
      (res) => {
        let text = "";
        res.on("data", (c) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/**
 * Starts the stand-in kube-apiserver on host:port (Node,RBAC, NodeRestriction, services in
 * 10.96.0.0/16) and waits for /livez; → its URL and a `system:masters` identity.
 */
export async function startApiServer(
  start: ReturnType<typeof processes>["start"],
  dir: string,
  ca: ReturnType<typeof makeCa>,
  host: string,
  port: number | undefined,
) {
  if (!port) throw new Error("startApiServer: no port");
  const tls = issue(join(dir, "certs"), ca, { cn: "kube-apiserver", ips: [host] });
  const masters = issue(join(dir, "certs"), ca, { cn: "keelson-bootstrap", groups: ["system:masters"] });
  const saKey = execFileSync("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], {
    encoding: "utf8",
  });
  const saPub = execFileSync("openssl", ["pkey", "-pubout"], { input: saKey, encoding: "utf8" });
  const server = `https://${host}:${port}`;
  start("kube-apiserver", [
    `--bind-address=${host}`,
    `--secure-port=${port}`,
    `--tls-cert-file=${writeSecret(join(dir, "apiserver.crt"), tls.cert)}`,
    `--tls-private-key-file=${writeSecret(join(dir, "apiserver.key"), tls.key)}`,
    `--client-ca-file=${ca.certFile}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-signing-key-file=${writeSecret(join(dir, "sa.key"), saKey)}`,
    `--service-account-key-file=${writeSecret(join(dir, "sa.pub"), saPub)}`,
    "--authorization-mode=Node,RBAC",
    "--enable-admission-plugins=NodeRestriction",
    "--service-cluster-ip-range=10.96.0.0/16",
  ]);
  await until("the stand-in apiserver", async () =>
    (await kubeCall(ca.cert, masters, "GET", `${server}/livez`)).status === 200 ? 1 : undefined,
  );
  return { server, masters };
}
