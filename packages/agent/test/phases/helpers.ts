import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { CertProfile } from "@keelson/protocol";
import { execa } from "execa";
import pino from "pino";
import { type NodeConfig, type NodeConfigInput, resolveNodeConfig } from "../../src/phases/config.ts";
import { buildContext } from "../../src/phases/context.ts";
import type { KubeApi } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { PhaseContext, PhaseIntent, SignCsr } from "../../src/phases/types.ts";
import type { ServiceManager } from "../../src/services/types.ts";

export const REPO_ROOT = resolve(fileURLToPath(new URL("../../../../", import.meta.url)));
export const FIXTURE_NODE_PACKAGE = join(REPO_ROOT, "test", "fixtures", "node-package");

/** Silent unless KEELSON_TEST_LOG is set (then at that level, to stderr). */
export function testLog() {
  return pino({ level: process.env.KEELSON_TEST_LOG ?? "silent" }, pino.destination(2));
}

export function tempDir(prefix: string): string {
  // Short paths: unix socket paths (containerd) are limited to 108 bytes.
  return mkdtempSync(join(tmpdir(), `k-${prefix}-`));
}

/** A port nobody listens on at `host` right now. */
export function freePort(host: string): Promise<number> {
  return new Promise((done, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/**
 * A real cluster CA made with openssl; `signCsr` signs like the control plane will: the key
 * usages come from the profile, the SANs from the CSR.
 */
export async function createTestCa(dir: string): Promise<{ caPem: string; signCsr: SignCsr; signed: CertProfile[] }> {
  mkdirSync(dir, { recursive: true });
  const caKey = join(dir, "ca.key");
  const caCrt = join(dir, "ca.crt");
  await execa("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    caKey,
    "-out",
    caCrt,
    "-subj",
    "/CN=keelson-test-cluster-ca",
    "-days",
    "2",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  const caPem = readFileSync(caCrt, "utf8");
  // The cluster's one service-account key, sent with every apiserver certificate as the control plane does.
  const serviceAccountKeyPem = generateKeyPairSync("ec", { namedCurve: "P-256" })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
  const signed: CertProfile[] = [];
  const signCsr: SignCsr = async (csrPem, profile) => {
    const id = randomBytes(6).toString("hex");
    const csrFile = join(dir, `${id}.csr`);
    const extFile = join(dir, `${id}.ext`);
    writeFileSync(csrFile, csrPem);
    const usages = {
      kubelet: "serverAuth,clientAuth",
      "kube-proxy": "clientAuth",
      apiserver: "serverAuth",
      bouncer: "serverAuth",
      "etcd-server": "serverAuth,clientAuth",
      "etcd-peer": "serverAuth,clientAuth",
      "etcd-client": "clientAuth",
      "apiserver-kubelet-client": "clientAuth",
      "kube-controller-manager": "serverAuth,clientAuth",
      "kube-scheduler": "serverAuth,clientAuth",
    }[profile];
    writeFileSync(
      extFile,
      `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=${usages}\n`,
    );
    const { stdout } = await execa("openssl", [
      "x509",
      "-req",
      "-in",
      csrFile,
      "-CA",
      caCrt,
      "-CAkey",
      caKey,
      "-set_serial",
      `0x${randomBytes(8).toString("hex")}`,
      "-days",
      "2",
      "-copy_extensions",
      "copyall",
      "-extfile",
      extFile,
    ]);
    rmSync(csrFile);
    rmSync(extFile);
    signed.push(profile);
    return {
      certPem: stdout,
      caPem,
      ...(profile === "apiserver" ? { serviceAccountKeyPem } : {}),
      // The test CA itself plays the certificates API's signing CA (the control plane sends an intermediate).
      ...(profile === "kube-controller-manager"
        ? { clusterSigning: { certPem: caPem, keyPem: readFileSync(caKey, "utf8") } }
        : {}),
    };
  };
  return { caPem, signCsr, signed };
}

/** The certificates a master asks for, in the order it asks: what the tests expect signed. */
export const MASTER_CERT_PROFILES: CertProfile[] = [
  "kubelet",
  "kube-proxy",
  "apiserver",
  "bouncer",
  "etcd-server",
  "etcd-peer",
  "etcd-client",
  "apiserver-kubelet-client",
  "kube-controller-manager",
  "kube-scheduler",
];

/**
 * A phase's context per intent, as the engine builds it, for tests that call phases directly.
 * Without `kubeApi` or `signCsr` the phase under test must not need them: a call fails it.
 */
export function phaseContexts(parts: {
  config: NodeConfig;
  services: ServiceManager;
  kubeApi?: KubeApi;
  /** Default: kubeApi, one fake playing both identities. */
  masterKubeApi?: KubeApi;
  signCsr?: SignCsr;
  timeoutMs?: number;
}): (intent?: PhaseIntent) => PhaseContext {
  const paths = nodePaths(parts.config.hostRoot);
  return (intent = "start") =>
    buildContext(
      {
        config: parts.config,
        paths,
        log: testLog(),
        services: parts.services,
        kubeApi: parts.kubeApi ?? (undefined as unknown as KubeApi),
        masterKubeApi: parts.masterKubeApi ?? parts.kubeApi ?? (undefined as unknown as KubeApi),
        signCsr:
          parts.signCsr ??
          (async () => {
            throw new Error("unused");
          }),
      },
      { signal: AbortSignal.timeout(parts.timeoutMs ?? 20_000), intent, regenerateCerts: false, log: testLog() },
    );
}

/** A /proc and /sys as a healthy node has them: no swap, modules loaded, sysctls set. */
export function fakeHost(
  dir: string,
  overrides: { swaps?: string; modules?: string; sysctls?: Record<string, string> } = {},
) {
  const procRoot = join(dir, "proc");
  const sysRoot = join(dir, "sys");
  mkdirSync(procRoot, { recursive: true });
  mkdirSync(join(sysRoot, "module"), { recursive: true });
  writeFileSync(join(procRoot, "swaps"), overrides.swaps ?? "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
  writeFileSync(
    join(procRoot, "modules"),
    overrides.modules ?? "overlay 151552 0 - Live 0x0000000000000000\nbr_netfilter 32768 0 - Live 0x0000000000000000\n",
  );
  const sysctls = overrides.sysctls ?? {
    "net.ipv4.ip_forward": "1",
    "net.bridge.bridge-nf-call-iptables": "1",
    "net.bridge.bridge-nf-call-ip6tables": "1",
  };
  for (const [name, value] of Object.entries(sysctls)) {
    const parts = name.split(".");
    mkdirSync(join(procRoot, "sys", ...parts.slice(0, -1)), { recursive: true });
    writeFileSync(join(procRoot, "sys", ...parts), `${value}\n`);
  }
  // No modules.builtin: the machine's own must not count for a fake host.
  return { procRoot, sysRoot, modulesRoot: join(dir, "lib", "modules") };
}

/** Free ports for every service of a node on `ip`. */
export async function freePorts(ip: string): Promise<NonNullable<NodeConfigInput["ports"]>> {
  const names = [
    "etcdClient",
    "etcdPeer",
    "apiServer",
    "kubelet",
    "kubeletHealthz",
    "kubeProxyHealthz",
    "kubeProxyMetrics",
    "bouncer",
    "corednsHealth",
    "corednsReady",
    "corednsMetrics",
    "corednsDns",
    "controllerManager",
    "scheduler",
  ] as const;
  const ports: Record<string, number> = {};
  const taken = new Set<number>();
  for (const name of names) {
    let port = await freePort(ip);
    while (taken.has(port)) port = await freePort(ip);
    taken.add(port);
    ports[name] = port;
  }
  return ports;
}

export function nodeConfig(
  input: Partial<NodeConfigInput> & Pick<NodeConfigInput, "hostRoot" | "primaryIp">,
): NodeConfig {
  return resolveNodeConfig({
    clusterId: "c1",
    nodeId: `node-${input.primaryIp.replaceAll(".", "-")}`,
    nodeName: `host-${input.primaryIp.split(".").pop()}`,
    role: "master",
    nodePackage: FIXTURE_NODE_PACKAGE,
    cluster: {},
    ...input,
    timeouts: {
      serviceStartMs: 15_000,
      waitForServicesMs: 15_000,
      commandMs: 15_000,
      serviceStopMs: 5_000,
      ...input.timeouts,
    },
  });
}
