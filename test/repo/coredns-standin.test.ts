import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { Resolver } from "node:dns/promises";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyBootstrapObjects } from "../../packages/agent/src/phases/impl/bootstrap-objects.ts";
import { renderCorefile } from "../../packages/agent/src/phases/impl/masters.ts";
import { nodePaths } from "../../packages/agent/src/phases/paths.ts";
import type { PhaseContext } from "../../packages/agent/src/phases/types.ts";
import { freePorts, nodeConfig } from "../../packages/agent/test/phases/helpers.ts";
import { issue, makeCa, type PemPair } from "../support/kube-pki.ts";

/**
 * The coredns stand-in answers DNS (UDP and TCP) from the stand-in kube-apiserver, with the
 * Corefile Keelson writes (renderCorefile) and the identity it names (the master's kubelet
 * certificate), asked by Node's own resolver (c-ares) on loopback. Before the bootstrap objects
 * give that identity the `system:coredns` role, CoreDNS cannot list what it must (the Node
 * authorizer grants a kubelet Services only) and answers SERVFAIL, as CoreDNS 1.11 does.
 */

const FIXTURE = join(import.meta.dirname, "..", "fixtures", "node-package");
const HOST = "127.0.0.1";
const dir = mkdtempSync(join(tmpdir(), "keelson-coredns-"));
const ca = makeCa(join(dir, "ca"));
const children: ChildProcess[] = [];
let server = "";

function start(binary: string, args: string[]) {
  const child = spawn(join(FIXTURE, "bin", binary), args, {
    env: { PATH: process.env.PATH ?? "", KEELSON_NODE_BIN: process.execPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const out = { text: "" };
  child.stdout?.on("data", (c) => {
    out.text += c;
  });
  child.stderr?.on("data", (c) => {
    out.text += c;
  });
  return out;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe().catch(() => undefined);
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function get(url: string, user?: PemPair) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = https.request(url, { ca: ca.cert, cert: user?.cert, key: user?.key }, (res) => {
      let text = "";
      res.on("data", (c) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end();
  });
}

const httpGet = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

const write = (path: string, text: string) => {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600 });
  return path;
};

const masters = issue(join(dir, "certs"), ca, { cn: "keelson-bootstrap", groups: ["system:masters"] });
let config: ReturnType<typeof nodeConfig>;
let paths: ReturnType<typeof nodePaths>;
let coredns: { text: string };
let resolver: Resolver;

/** A Corefile as Keelson writes it for `config`, at `path`, its kubelet files under `root`. */
function corefileFor(cfg: ReturnType<typeof nodeConfig>, kubelet: PemPair) {
  const p = nodePaths(cfg.hostRoot);
  write(p.caCert, ca.cert);
  write(p.cert("kubelet"), kubelet.cert);
  write(p.key("kubelet"), kubelet.key);
  const file = renderCorefile(cfg, p);
  return write(file.path, file.content);
}

beforeAll(async () => {
  const tls = issue(join(dir, "certs"), ca, { cn: "kube-apiserver", ips: [HOST] });
  const saKey = execFileSync("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], {
    encoding: "utf8",
  });
  const saPub = execFileSync("openssl", ["pkey", "-pubout"], { input: saKey, encoding: "utf8" });
  const ports = await freePorts(HOST);
  server = `https://${HOST}:${ports.apiServer}`;
  start("kube-apiserver", [
    `--bind-address=${HOST}`,
    `--secure-port=${ports.apiServer}`,
    `--tls-cert-file=${write(join(dir, "apiserver.crt"), tls.cert)}`,
    `--tls-private-key-file=${write(join(dir, "apiserver.key"), tls.key)}`,
    `--client-ca-file=${ca.certFile}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-signing-key-file=${write(join(dir, "sa.key"), saKey)}`,
    `--service-account-key-file=${write(join(dir, "sa.pub"), saPub)}`,
    "--authorization-mode=Node,RBAC",
    "--enable-admission-plugins=NodeRestriction",
    "--service-cluster-ip-range=10.96.0.0/16",
  ]);
  await until("the stand-in apiserver", async () =>
    (await get(`${server}/livez`, masters)).status === 200 ? 1 : undefined,
  );

  config = nodeConfig({
    hostRoot: join(dir, "master"),
    primaryIp: HOST,
    apiServerUrl: server,
    ports,
    cluster: { servicesCidr: "10.96.0.0/16" },
  });
  paths = nodePaths(config.hostRoot);
  write(paths.cert("apiserver-kubelet-client"), masters.cert);
  write(paths.key("apiserver-kubelet-client"), masters.key);
  const kubelet = issue(join(dir, "certs"), ca, { cn: `system:node:${config.nodeName}`, groups: ["system:nodes"] });
  coredns = start("coredns", ["-conf", corefileFor(config, kubelet)]);
  resolver = new Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([`${HOST}:${config.ports.corednsDns}`]);
}, 60_000);

afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

const errorCode = (p: Promise<unknown>) =>
  p.then(
    () => "answered",
    (err: NodeJS.ErrnoException) => err.code,
  );

/** One query over TCP (RFC 1035 4.2.2 framing) → the answer's rcode, counts and bytes. */
function tcpQuery(port: number, name: string, type: number) {
  const labels = name.split(".").map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const question = Buffer.concat([...labels, Buffer.from([0, 0, type, 0, 1])]);
  const header = Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  const message = Buffer.concat([header, question]);
  return new Promise<{ rcode: number; id: number; answers: number; authority: number; bytes: Buffer }>(
    (resolve, reject) => {
      const socket = connect({ host: HOST, port }, () => {
        socket.write(Buffer.concat([Buffer.from([0, message.length]), message]));
      });
      let got = Buffer.alloc(0);
      socket.on("data", (c) => {
        got = Buffer.concat([got, c]);
        if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
          socket.end();
          const bytes = got.subarray(2);
          resolve({
            id: bytes.readUInt16BE(0),
            rcode: bytes.readUInt8(3) & 0xf,
            answers: bytes.readUInt16BE(6),
            authority: bytes.readUInt16BE(8),
            bytes,
          });
        }
      });
      socket.on("error", reject);
    },
  );
}

describe("the coredns stand-in answers DNS with Keelson's Corefile", () => {
  it("as the master's kubelet alone it cannot list namespaces or endpointslices: it starts unsynced and answers SERVFAIL", async () => {
    // The banner comes once the DNS listeners are bound, after the unsynced warning.
    await until("coredns to start", async () => (coredns.text.includes("CoreDNS-1.11.1") ? 1 : undefined));
    expect(coredns.text).toContain("[WARNING] plugin/kubernetes: starting server with unsynced Kubernetes API");
    const who = `User "system:node:${config.nodeName}"`;
    expect(coredns.text).toContain(
      `[ERROR] plugin/kubernetes: Failed to watch *v1.Namespace: failed to list *v1.Namespace: namespaces is forbidden: ${who} cannot list resource "namespaces" in API group "" at the cluster scope`,
    );
    expect(coredns.text).toContain(
      `Failed to watch *v1.EndpointSlice: failed to list *v1.EndpointSlice: endpointslices.discovery.k8s.io is forbidden: ${who} cannot list resource "endpointslices" in API group "discovery.k8s.io" at the cluster scope`,
    );
    // The Node authorizer lets a kubelet list Services.
    expect(coredns.text).not.toContain("*v1.Service:");
    expect(await errorCode(resolver.resolve4("kubernetes.default.svc.cluster.local"))).toBe("ESERVFAIL");
    expect(await httpGet(`http://${HOST}:${config.ports.corednsReady}/ready`)).toEqual({
      status: 503,
      text: "kubernetes",
    });
    expect((await httpGet(`http://${HOST}:${config.ports.corednsHealth}/health`)).status).toBe(200);
  }, 20_000);

  it("once the bootstrap objects bind system:coredns to it, kubernetes.default and kube-dns resolve to the API's Service IPs", async () => {
    const changes = await applyBootstrapObjects({
      config,
      paths,
      signal: new AbortController().signal,
    } as PhaseContext);
    expect(changes).toContain("created ClusterRole system:coredns");
    expect(changes).toContain(`created ClusterRoleBinding keelson:coredns:${config.nodeName.toLowerCase()}`);
    expect(changes).toContain("created Service kube-system/kube-dns");
    const kubernetes = await until("kubernetes.default to resolve", () =>
      resolver.resolve4("kubernetes.default.svc.cluster.local"),
    );
    expect(kubernetes).toEqual(["10.96.0.1"]);
    expect(await resolver.resolve4("kube-dns.kube-system.svc.cluster.local")).toEqual(["10.96.0.10"]);
    const svc = JSON.parse((await get(`${server}/api/v1/namespaces/kube-system/services/kube-dns`, masters)).text);
    expect(svc.spec.clusterIP).toBe("10.96.0.10");
    expect(await resolver.resolve4("kube-dns.kube-system.svc.cluster.local", { ttl: true })).toEqual([
      { address: "10.96.0.10", ttl: 5 },
    ]);
    expect(await resolver.reverse("10.96.0.10")).toEqual(["kube-dns.kube-system.svc.cluster.local"]);
    expect(await httpGet(`http://${HOST}:${config.ports.corednsReady}/ready`)).toEqual({ status: 200, text: "OK" });
  }, 20_000);

  it("a missing Service or namespace is NXDOMAIN with the zone's SOA; an existing name without that type is NODATA", async () => {
    expect(await errorCode(resolver.resolve4("nope.default.svc.cluster.local"))).toBe("ENOTFOUND");
    expect(await errorCode(resolver.resolve4("kube-dns.nowhere.svc.cluster.local"))).toBe("ENOTFOUND");
    expect(await errorCode(resolver.resolve4("kube-dns.kube-system.other.cluster.local"))).toBe("ENOTFOUND");
    // An IPv4 Service has no AAAA: NOERROR without answers (c-ares calls it ENODATA).
    expect(await errorCode(resolver.resolve6("kube-dns.kube-system.svc.cluster.local"))).toBe("ENODATA");
    expect(await resolver.resolveSoa("cluster.local")).toMatchObject({
      nsname: "ns.dns.cluster.local",
      hostmaster: "hostmaster.cluster.local",
      refresh: 7200,
      retry: 1800,
      expire: 86400,
      minttl: 5,
    });
    // Over TCP, the NXDOMAIN answer itself: rcode 3, no answer, the SOA in the authority section.
    const nx = await tcpQuery(config.ports.corednsDns, "nope.default.svc.cluster.local", 1);
    expect(nx).toMatchObject({ id: 0x1234, rcode: 3, answers: 0, authority: 1 });
    expect(nx.bytes.includes(Buffer.from("\x0ahostmaster\x07cluster\x05local", "latin1"))).toBe(true);
    const ok = await tcpQuery(config.ports.corednsDns, "kube-dns.kube-system.svc.cluster.local", 1);
    expect(ok).toMatchObject({ rcode: 0, answers: 1, authority: 0 });
    expect([...ok.bytes.subarray(-4)]).toEqual([10, 96, 0, 10]);
  });

  it("follows the API: a new Service resolves, a deleted one stops; pods insecure; other names are not forwarded off the machine", async () => {
    const name = "probe.default.svc.cluster.local";
    const created = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        `${server}/api/v1/namespaces/default/services`,
        {
          method: "POST",
          ca: ca.cert,
          cert: masters.cert,
          key: masters.key,
          headers: { "content-type": "application/json" },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(
        JSON.stringify({ metadata: { name: "probe" }, spec: { clusterIP: "10.96.0.77", ports: [{ port: 80 }] } }),
      );
    });
    expect(created).toBe(201);
    expect(await until("the new Service", () => resolver.resolve4(name))).toEqual(["10.96.0.77"]);
    const deleted = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        `${server}/api/v1/namespaces/default/services/probe`,
        { method: "DELETE", ca: ca.cert, cert: masters.cert, key: masters.key },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(deleted).toBe(200);
    expect(
      await until("the deleted Service to be gone", async () =>
        (await errorCode(resolver.resolve4(name))) === "ENOTFOUND" ? true : undefined,
      ),
    ).toBe(true);
    expect(await resolver.resolve4("10-1-2-3.default.pod.cluster.local")).toEqual(["10.1.2.3"]);
    expect(await errorCode(resolver.resolve4("10-1-2-3.nowhere.pod.cluster.local"))).toBe("ENOTFOUND");
    // forward: the stand-in sends nothing off this machine and answers as CoreDNS does when no upstream replies.
    expect(await errorCode(resolver.resolve4("example.com"))).toBe("ESERVFAIL");
  }, 20_000);

  it("an identity the API does not trust (a foreign CA's certificate) gets 401: the reflector's Unauthorized, and SERVFAIL", async () => {
    const foreignCa = makeCa(join(dir, "foreign-ca"), "someone-else");
    const stranger = issue(join(dir, "certs"), foreignCa, { cn: "system:node:x", groups: ["system:nodes"] });
    const other = nodeConfig({
      hostRoot: join(dir, "stranger"),
      primaryIp: HOST,
      apiServerUrl: server,
      ports: await freePorts(HOST),
      cluster: { servicesCidr: "10.96.0.0/16" },
    });
    const out = start("coredns", ["-conf", corefileFor(other, stranger)]);
    await until("coredns to start", async () => (out.text.includes("CoreDNS-1.11.1") ? 1 : undefined));
    expect(out.text).toContain("[WARNING] plugin/kubernetes: starting server with unsynced Kubernetes API");
    expect(out.text).toContain(
      "[ERROR] plugin/kubernetes: Failed to watch *v1.Service: failed to list *v1.Service: Unauthorized",
    );
    const r = new Resolver({ timeout: 2000, tries: 1 });
    r.setServers([`${HOST}:${other.ports.corednsDns}`]);
    expect(await errorCode(r.resolve4("kube-dns.kube-system.svc.cluster.local"))).toBe("ESERVFAIL");
    // The CA file itself is read as CoreDNS reads it: a missing one refuses the start, exit 1.
    const corefile = readFileSync(nodePaths(other.hostRoot).corefile, "utf8").replace(
      nodePaths(other.hostRoot).caCert,
      join(dir, "missing-ca.crt"),
    );
    const broken = write(join(dir, "broken", "Corefile"), corefile);
    const refused = spawn(join(FIXTURE, "bin", "coredns"), ["-conf", broken], {
      env: { PATH: process.env.PATH ?? "", KEELSON_NODE_BIN: process.execPath },
    });
    children.push(refused);
    let said = "";
    refused.stdout.on("data", (c) => {
      said += c;
    });
    const code = await new Promise<number | null>((resolve) => refused.on("exit", resolve));
    expect(code).toBe(1);
    expect(said).toBe(`plugin/kubernetes: open ${join(dir, "missing-ca.crt")}: no such file or directory\n`);
  }, 20_000);
});
