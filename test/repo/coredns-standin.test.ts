import { Resolver } from "node:dns/promises";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyBootstrapObjects } from "../../packages/agent/src/phases/impl/bootstrap-objects.ts";
import { renderCorefile } from "../../packages/agent/src/phases/impl/masters.ts";
import { nodePaths } from "../../packages/agent/src/phases/paths.ts";
import type { PhaseContext } from "../../packages/agent/src/phases/types.ts";
import { freePorts, nodeConfig } from "../../packages/agent/test/phases/helpers.ts";
import { issue, makeCa, type PemPair } from "../support/kube-pki.ts";
import { kubeCall, processes, startApiServer, until, writeSecret as write } from "../support/standin-cluster.ts";

/**
 * The coredns stand-in answers DNS (UDP and TCP) from the stand-in kube-apiserver, with the
 * Corefile Keelson writes (renderCorefile) and the identity it names (the master's kubelet
 * certificate), asked by Node's own resolver (c-ares) on loopback. Before the bootstrap objects
 * give that identity the `system:coredns` role, CoreDNS cannot list what it must (the Node
 * authorizer grants a kubelet Services only) and answers SERVFAIL, as CoreDNS 1.11 does.
 */

const HOST = "127.0.0.1";
const dir = mkdtempSync(join(tmpdir(), "keelson-coredns-"));
const ca = makeCa(join(dir, "ca"));
const { start, stopAll } = processes();
let server = "";
let masters: PemPair;
const get = (url: string, user?: PemPair) => kubeCall(ca.cert, user, "GET", url);

const httpGet = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

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
  const ports = await freePorts(HOST);
  ({ server, masters } = await startApiServer(start, dir, ca, HOST, ports.apiServer));

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
  stopAll();
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
    const created = (
      await kubeCall(ca.cert, masters, "POST", `${server}/api/v1/namespaces/default/services`, {
        metadata: { name: "probe" },
        spec: { clusterIP: "10.96.0.77", ports: [{ port: 80 }] },
      })
    ).status;
    expect(created).toBe(201);
    expect(await until("the new Service", () => resolver.resolve4(name))).toEqual(["10.96.0.77"]);
    const deleted = (await kubeCall(ca.cert, masters, "DELETE", `${server}/api/v1/namespaces/default/services/probe`))
      .status;
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

  it("serves the prometheus plugin's /metrics on the Corefile's address: the request and response counters grow with real queries", async () => {
    expect(readFileSync(paths.corefile, "utf8")).toContain(`    prometheus ${HOST}:${config.ports.corednsMetrics}\n`);
    const metrics = async () => {
      const res = await httpGet(`http://${HOST}:${config.ports.corednsMetrics}/metrics`);
      expect(res.status).toBe(200);
      return res.text;
    };
    // The counter's value for exactly these labels (client_golang writes them in name order), 0 if absent.
    const value = (text: string, name: string, labels: Record<string, string>) => {
      const key = Object.entries(labels)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k}="${v}"`)
        .join(",");
      const line = text.split("\n").find((l) => l.startsWith(`${name}{${key}} `));
      return line ? Number(line.split(" ")[1]) : 0;
    };
    const server = `dns://${HOST}:${config.ports.corednsDns}`;
    const request = { server, zone: ".", view: "", proto: "tcp", family: "1", type: "A" };
    const noerror = { server, zone: ".", view: "", rcode: "NOERROR", plugin: "kubernetes" };
    const nxdomain = { ...noerror, rcode: "NXDOMAIN" };
    const before = await metrics();
    expect(before).toContain('coredns_build_info{goversion="go1.20",revision="ae2bbc2",version="1.11.1"} 1\n');
    expect((await tcpQuery(config.ports.corednsDns, "kube-dns.kube-system.svc.cluster.local", 1)).rcode).toBe(0);
    expect((await tcpQuery(config.ports.corednsDns, "kube-dns.kube-system.svc.cluster.local", 1)).rcode).toBe(0);
    expect((await tcpQuery(config.ports.corednsDns, "nope.default.svc.cluster.local", 1)).rcode).toBe(3);
    const after = await metrics();
    expect(after).toContain("# TYPE coredns_dns_requests_total counter\n");
    expect(after).toContain("# TYPE coredns_dns_responses_total counter\n");
    expect(value(after, "coredns_dns_requests_total", request)).toBe(
      value(before, "coredns_dns_requests_total", request) + 3,
    );
    expect(value(after, "coredns_dns_responses_total", noerror)).toBe(
      value(before, "coredns_dns_responses_total", noerror) + 2,
    );
    expect(value(after, "coredns_dns_responses_total", nxdomain)).toBe(
      value(before, "coredns_dns_responses_total", nxdomain) + 1,
    );
    expect((await httpGet(`http://${HOST}:${config.ports.corednsMetrics}/other`)).status).toBe(404);
  });

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
    const refused = start("coredns", ["-conf", broken]);
    const code = await new Promise<number | null>((resolve) => refused.child.on("close", resolve));
    expect(code).toBe(1);
    // coremain's mustLogFatal writes to stderr.
    expect(refused.stderr).toBe(`plugin/kubernetes: open ${join(dir, "missing-ca.crt")}: no such file or directory\n`);
    expect(refused.stdout).toBe("");
  }, 20_000);
});
