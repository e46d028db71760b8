import { Resolver } from "node:dns/promises";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePorts } from "../../packages/agent/test/phases/helpers.ts";
import { type DnsAnswer, QTYPE, queryUdp } from "../support/dns-client.ts";
import { makeCa, type PemPair } from "../support/kube-pki.ts";
import { kubeCall, processes, startApiServer, until, writeSecret } from "../support/standin-cluster.ts";

/**
 * What the coredns stand-in answers for the names of the Kubernetes DNS specification, as
 * CoreDNS 1.11's kubernetes plugin answers them (sources in test/fixtures/node-package/lib/
 * coredns-k8s-records.mjs and coredns-lookup.mjs): SRV for named ports, headless Services'
 * endpoints, ExternalName as CNAME, the three pod modes, and NXDOMAIN against NODATA with the
 * zone's SOA. Real DNS queries over loopback UDP, decoded whole (test/support/dns-client.ts), and
 * some through Node's own resolver (c-ares) as an independent reader of the same answers.
 */

const HOST = "127.0.0.1";
const dir = mkdtempSync(join(tmpdir(), "keelson-coredns-records-"));
const ca = makeCa(join(dir, "ca"));
const { start, stopAll } = processes();
let server = "";
let masters: PemPair;
/** The DNS port of the coredns run with each `pods` mode. */
const dnsPort: Record<string, number> = {};

const ZONE = "cluster.local";
const SOA = /^ns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5$/;

async function create(path: string, object: unknown) {
  const r = await kubeCall(ca.cert, masters, "POST", `${server}${path}`, object);
  if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${r.text}`);
}

const service = (name: string, spec: object) =>
  create("/api/v1/namespaces/default/services", { metadata: { name }, spec });

/**
 * A Corefile for a coredns that reads the API as system:masters with `pods <mode>` (and other
 * properties of the kubernetes block); started, and ready. Asked as `mode` (or `as`).
 */
async function startCoredns(mode: string, properties: string[] = [], as = mode) {
  const ports = await freePorts(HOST);
  const cert = writeSecret(join(dir, "masters.crt"), masters.cert);
  const key = writeSecret(join(dir, "masters.key"), masters.key);
  const corefile = writeSecret(
    join(dir, `Corefile.${as}`),
    [
      `.:${ports.corednsDns} {`,
      `    bind ${HOST}`,
      "    errors",
      `    health ${HOST}:${ports.corednsHealth}`,
      `    ready ${HOST}:${ports.corednsReady}`,
      "    kubernetes cluster.local in-addr.arpa ip6.arpa {",
      `        endpoint ${server}`,
      `        tls ${cert} ${key} ${ca.certFile}`,
      `        pods ${mode}`,
      ...properties.map((p) => `        ${p}`),
      "        fallthrough in-addr.arpa ip6.arpa",
      "    }",
      "    forward . /etc/resolv.conf",
      "}",
      "",
    ].join("\n"),
  );
  start("coredns", ["-conf", corefile]);
  await until(`coredns (${as}) to be ready`, async () => {
    const res = await fetch(`http://${HOST}:${ports.corednsReady}/ready`);
    return res.status === 200 ? true : undefined;
  });
  dnsPort[as] = Number(ports.corednsDns);
}

const ask = (name: string, type: number, mode = "insecure") => queryUdp(HOST, Number(dnsPort[mode]), name, type);
const rrs = (a: DnsAnswer["answer"]) => a.map((r) => `${r.name} ${r.ttl} ${r.type} ${r.data}`);
const soaOnly = (a: DnsAnswer) => {
  const [soa, ...more] = a.authority;
  return more.length === 0 && soa?.type === "SOA" && SOA.test(soa.data);
};

beforeAll(async () => {
  const ports = await freePorts(HOST);
  ({ server, masters } = await startApiServer(start, dir, ca, HOST, ports.apiServer));
  await service("web", {
    clusterIP: "10.96.0.80",
    ports: [
      { name: "http", port: 80, protocol: "TCP" },
      { name: "dns", port: 53, protocol: "UDP" },
    ],
  });
  await service("db", { clusterIP: "None", ports: [{ name: "pg", port: 5432, protocol: "TCP" }] });
  await create("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
    metadata: { name: "db-x1", labels: { "kubernetes.io/service-name": "db" } },
    addressType: "IPv4",
    ports: [{ name: "pg", port: 5432, protocol: "TCP" }],
    endpoints: [
      { addresses: ["10.1.0.5"], hostname: "db-0", conditions: { ready: true } },
      { addresses: ["10.1.0.6"], targetRef: { kind: "Pod", namespace: "default", name: "db-pod-6" } },
      { addresses: ["10.1.0.7"], hostname: "db-2", conditions: { ready: false } },
    ],
  });
  await service("db6", { clusterIP: "None", ports: [{ name: "pg", port: 5432, protocol: "TCP" }] });
  await create("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
    metadata: { name: "db6-x1", labels: { "kubernetes.io/service-name": "db6" } },
    addressType: "IPv6",
    ports: [{ name: "pg", port: 5432, protocol: "TCP" }],
    endpoints: [{ addresses: ["fd00::7"] }],
  });
  await create("/api/v1/namespaces/kube-system/services", {
    metadata: { name: "sys" },
    spec: { clusterIP: "10.96.0.90", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
  });
  await service("empty", { clusterIP: "None", ports: [{ name: "pg", port: 5432, protocol: "TCP" }] });
  await service("ext", { type: "ExternalName", externalName: "db.example.com" });
  await service("alias", { type: "ExternalName", externalName: "web.default.svc.cluster.local" });
  const pod = (name: string, ip: string, phase: string) =>
    create("/api/v1/namespaces/default/pods", {
      metadata: { name },
      spec: { containers: [{ name: "c", image: "registry.invalid/c:1" }] },
      status: { phase, podIP: ip, podIPs: [{ ip }] },
    });
  await pod("running", "10.1.0.9", "Running");
  await pod("done", "10.1.0.10", "Succeeded");
  // One after another: free ports are picked per start.
  for (const mode of ["insecure", "verified", "disabled"]) await startCoredns(mode);
  await startCoredns(
    "insecure",
    ["namespaces default", "endpoint_pod_names", "ignore empty_service", "ttl 30"],
    "options",
  );
}, 60_000);

afterAll(() => {
  stopAll();
  rmSync(dir, { recursive: true, force: true });
});

describe("the coredns stand-in answers the Kubernetes DNS names as CoreDNS 1.11 does", () => {
  it("SRV for a named port of a cluster-IP Service: the Service's name as target, its address in the additional section", async () => {
    const http = await ask(`_http._tcp.web.default.svc.${ZONE}`, QTYPE.SRV);
    expect(http).toMatchObject({ rcode: "NOERROR", aa: true, authority: [] });
    expect(rrs(http.answer)).toEqual([`_http._tcp.web.default.svc.${ZONE}. 5 SRV 0 100 80 web.default.svc.${ZONE}.`]);
    expect(rrs(http.additional)).toEqual([`web.default.svc.${ZONE}. 5 A 10.96.0.80`]);
    // The Service's own name holds one SRV per port, the weight shared out (100/n).
    const all = await ask(`web.default.svc.${ZONE}`, QTYPE.SRV);
    expect(rrs(all.answer)).toEqual([
      `web.default.svc.${ZONE}. 5 SRV 0 50 80 web.default.svc.${ZONE}.`,
      `web.default.svc.${ZONE}. 5 SRV 0 50 53 web.default.svc.${ZONE}.`,
    ]);
    expect(rrs(all.additional)).toEqual([`web.default.svc.${ZONE}. 5 A 10.96.0.80`]);
    // A port or protocol the Service does not have is no name at all.
    for (const name of [`_nope._tcp.web.default.svc.${ZONE}`, `_http._udp.web.default.svc.${ZONE}`]) {
      const nx = await ask(name, QTYPE.SRV);
      expect(nx).toMatchObject({ rcode: "NXDOMAIN", answer: [] });
      expect(soaOnly(nx)).toBe(true);
    }
    // Names compare without case; the answer keeps the question's spelling (RFC 4343), the SOA's zone too.
    const mixed = await ask(`_HTTP._tcp.Web.Default.svc.Cluster.Local`, QTYPE.SRV);
    expect(rrs(mixed.answer)).toEqual([
      `_HTTP._tcp.Web.Default.svc.Cluster.Local. 5 SRV 0 100 80 web.default.svc.${ZONE}.`,
    ]);
    const mixedNx = await ask(`Nope.Default.svc.Cluster.Local`, QTYPE.A);
    expect(mixedNx.authority[0]?.name).toBe("Cluster.Local.");
    expect(mixedNx.authority[0]?.data).toMatch(/^ns\.dns\.Cluster\.Local\. hostmaster\.Cluster\.Local\. /);
    // c-ares reads the same answer.
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`${HOST}:${dnsPort.insecure}`]);
    expect(await resolver.resolveSrv(`_dns._udp.web.default.svc.${ZONE}`)).toEqual([
      { name: `web.default.svc.${ZONE}`, port: 53, priority: 0, weight: 100 },
    ]);
  });

  it("a headless Service: one A per ready endpoint, SRV per endpoint named by its hostname or dashed address, and those names resolve", async () => {
    const a = await ask(`db.default.svc.${ZONE}`, QTYPE.A);
    expect(rrs(a.answer)).toEqual([`db.default.svc.${ZONE}. 5 A 10.1.0.5`, `db.default.svc.${ZONE}. 5 A 10.1.0.6`]);
    const srv = await ask(`_pg._tcp.db.default.svc.${ZONE}`, QTYPE.SRV);
    expect(rrs(srv.answer)).toEqual([
      `_pg._tcp.db.default.svc.${ZONE}. 5 SRV 0 50 5432 db-0.db.default.svc.${ZONE}.`,
      `_pg._tcp.db.default.svc.${ZONE}. 5 SRV 0 50 5432 10-1-0-6.db.default.svc.${ZONE}.`,
    ]);
    expect(rrs(srv.additional)).toEqual([
      `db-0.db.default.svc.${ZONE}. 5 A 10.1.0.5`,
      `10-1-0-6.db.default.svc.${ZONE}. 5 A 10.1.0.6`,
    ]);
    expect(rrs((await ask(`db-0.db.default.svc.${ZONE}`, QTYPE.A)).answer)).toEqual([
      `db-0.db.default.svc.${ZONE}. 5 A 10.1.0.5`,
    ]);
    expect(rrs((await ask(`10-1-0-6.db.default.svc.${ZONE}`, QTYPE.A)).answer)).toEqual([
      `10-1-0-6.db.default.svc.${ZONE}. 5 A 10.1.0.6`,
    ]);
    // The endpoint that is not ready has no name; nor has a hostname no endpoint carries.
    expect((await ask(`db-2.db.default.svc.${ZONE}`, QTYPE.A)).rcode).toBe("NXDOMAIN");
    expect((await ask(`db-9.db.default.svc.${ZONE}`, QTYPE.A)).rcode).toBe("NXDOMAIN");
    // Reverse: an endpoint's address names the endpoint.
    expect(rrs((await ask("5.0.1.10.in-addr.arpa", QTYPE.PTR)).answer)).toEqual([
      `5.0.1.10.in-addr.arpa. 5 PTR db-0.db.default.svc.${ZONE}.`,
    ]);
    // IPv6: AAAA, the endpoint named by its address with dashes, SRV's address record an AAAA, ip6.arpa PTR.
    expect(rrs((await ask(`db6.default.svc.${ZONE}`, QTYPE.AAAA)).answer)).toEqual([
      `db6.default.svc.${ZONE}. 5 AAAA fd00:0:0:0:0:0:0:7`,
    ]);
    expect((await ask(`db6.default.svc.${ZONE}`, QTYPE.A)).rcode).toBe("NOERROR");
    const srv6 = await ask(`_pg._tcp.db6.default.svc.${ZONE}`, QTYPE.SRV);
    expect(rrs(srv6.answer)).toEqual([
      `_pg._tcp.db6.default.svc.${ZONE}. 5 SRV 0 100 5432 fd00--7.db6.default.svc.${ZONE}.`,
    ]);
    expect(rrs(srv6.additional)).toEqual([`fd00--7.db6.default.svc.${ZONE}. 5 AAAA fd00:0:0:0:0:0:0:7`]);
    const nibbles = `fd00${"0".repeat(27)}7`.split("").reverse().join(".");
    expect(rrs((await ask(`${nibbles}.ip6.arpa`, QTYPE.PTR)).answer)).toEqual([
      `${nibbles}.ip6.arpa. 5 PTR fd00--7.db6.default.svc.${ZONE}.`,
    ]);
    // A headless Service without a ready endpoint is a name error in CoreDNS 1.11 (errNoItems).
    const empty = await ask(`empty.default.svc.${ZONE}`, QTYPE.A);
    expect(empty.rcode).toBe("NXDOMAIN");
    expect(soaOnly(empty)).toBe(true);
  });

  it("an ExternalName Service is a CNAME: followed inside the zone, alone when its target is outside; no SRV", async () => {
    const ext = await ask(`ext.default.svc.${ZONE}`, QTYPE.A);
    // The target is looked up upstream (forward), which the stand-in never reaches: the CNAME alone.
    expect(ext).toMatchObject({ rcode: "NOERROR", authority: [] });
    expect(rrs(ext.answer)).toEqual([`ext.default.svc.${ZONE}. 5 CNAME db.example.com.`]);
    expect(rrs((await ask(`ext.default.svc.${ZONE}`, QTYPE.CNAME)).answer)).toEqual([
      `ext.default.svc.${ZONE}. 5 CNAME db.example.com.`,
    ]);
    const srv = await ask(`ext.default.svc.${ZONE}`, QTYPE.SRV);
    expect(srv).toMatchObject({ rcode: "NOERROR", answer: [] });
    expect(soaOnly(srv)).toBe(true);
    const alias = await ask(`alias.default.svc.${ZONE}`, QTYPE.A);
    expect(rrs(alias.answer)).toEqual([
      `alias.default.svc.${ZONE}. 5 CNAME web.default.svc.${ZONE}.`,
      `web.default.svc.${ZONE}. 5 A 10.96.0.80`,
    ]);
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`${HOST}:${dnsPort.insecure}`]);
    expect(await resolver.resolve4(`alias.default.svc.${ZONE}`)).toEqual(["10.96.0.80"]);
    expect(await resolver.resolveCname(`ext.default.svc.${ZONE}`)).toEqual(["db.example.com"]);
  });

  it("pods insecure answers any address in an existing namespace; verified only a listed, live pod's; disabled none", async () => {
    const name = (ip: string, ns = "default") => `${ip.replaceAll(".", "-")}.${ns}.pod.${ZONE}`;
    const answer = async (ip: string, mode: string, ns = "default") => {
      const a = await ask(name(ip, ns), QTYPE.A, mode);
      return a.rcode === "NOERROR" ? rrs(a.answer) : a.rcode;
    };
    expect(await answer("10.1.2.3", "insecure")).toEqual([`${name("10.1.2.3")}. 5 A 10.1.2.3`]);
    expect(await answer("10.1.2.3", "insecure", "nowhere")).toBe("NXDOMAIN");
    expect(await answer("10.1.0.9", "verified")).toEqual([`${name("10.1.0.9")}. 5 A 10.1.0.9`]);
    expect(await answer("10.1.2.3", "verified")).toBe("NXDOMAIN");
    // The pod lives in default, not kube-system; and a Succeeded pod is not listed.
    expect(await answer("10.1.0.9", "verified", "kube-system")).toBe("NXDOMAIN");
    expect(await answer("10.1.0.10", "verified")).toBe("NXDOMAIN");
    expect(await answer("10.1.0.9", "disabled")).toBe("NXDOMAIN");
    // The namespace's own name under pod: NODATA in the two modes that answer pods.
    const ns = await ask(`default.pod.${ZONE}`, QTYPE.A, "verified");
    expect(ns).toMatchObject({ rcode: "NOERROR", answer: [] });
    expect(soaOnly(ns)).toBe(true);
  });

  it("NXDOMAIN for a name that does not exist, NODATA (NOERROR, empty) for one without that type, each with the zone's SOA", async () => {
    const nodata = [
      [`web.default.svc.${ZONE}`, QTYPE.AAAA],
      [`web.default.svc.${ZONE}`, QTYPE.MX],
      [`web.default.svc.${ZONE}`, QTYPE.TXT],
      [`web.default.svc.${ZONE}`, QTYPE.NS],
      [`web.default.svc.${ZONE}`, QTYPE.CNAME],
      [`default.svc.${ZONE}`, QTYPE.A],
      [`svc.${ZONE}`, QTYPE.A],
      [ZONE, QTYPE.A],
      // NS names the Services whose endpoint this CoreDNS's bound addresses are; CoreDNS 1.11 reads
      // a `bind` address as a CIDR, which a plain address is not, so with `bind` there are none.
      [ZONE, QTYPE.NS],
      [`ns.dns.${ZONE}`, QTYPE.A],
      // SOA away from the apex is NODATA without looking the name up (handler.go).
      [`nope.default.svc.${ZONE}`, QTYPE.SOA],
    ] as const;
    for (const [name, type] of nodata) {
      const a = await ask(name, type);
      expect({ name, type, rcode: a.rcode, answer: a.answer, aa: a.aa }).toEqual({
        name,
        type,
        rcode: "NOERROR",
        answer: [],
        aa: true,
      });
      expect(soaOnly(a)).toBe(true);
    }
    const nxdomain = [
      [`nope.default.svc.${ZONE}`, QTYPE.A],
      [`nope.default.svc.${ZONE}`, QTYPE.AAAA],
      [`nope.default.svc.${ZONE}`, QTYPE.TXT],
      [`web.nowhere.svc.${ZONE}`, QTYPE.A],
      [`nowhere.svc.${ZONE}`, QTYPE.A],
      [`web.default.other.${ZONE}`, QTYPE.A],
      [`a.b.c.web.default.svc.${ZONE}`, QTYPE.A],
      // TXT: a namespace's name has no records, so it is a name error for TXT (kubernetes.go Services).
      [`default.svc.${ZONE}`, QTYPE.TXT],
    ] as const;
    for (const [name, type] of nxdomain) {
      const a = await ask(name, type);
      expect({ name, type, rcode: a.rcode, answer: a.answer }).toEqual({ name, type, rcode: "NXDOMAIN", answer: [] });
      expect(soaOnly(a)).toBe(true);
      expect(a.authority[0]).toMatchObject({ name: `${ZONE}.`, ttl: 5 });
    }
    // The apex SOA is an answer; dns-version.<zone> is the schema's one TXT; zone transfers are refused.
    const soa = await ask(ZONE, QTYPE.SOA);
    expect(soa.answer).toHaveLength(1);
    expect(SOA.test(soa.answer[0]?.data ?? "")).toBe(true);
    expect(soa.authority).toEqual([]);
    expect(rrs((await ask(`dns-version.${ZONE}`, QTYPE.TXT)).answer)).toEqual([`dns-version.${ZONE}. 28800 TXT 1.1.0`]);
    expect(await ask(ZONE, QTYPE.AXFR)).toMatchObject({ rcode: "REFUSED", aa: false, answer: [], authority: [] });
  });

  it("namespaces, endpoint_pod_names, ignore empty_service and ttl change the answers as CoreDNS plays them", async () => {
    const rcode = async (name: string, as: string) => (await ask(name, QTYPE.A, as)).rcode;
    // namespaces: kube-system is not exposed, so its Services are no names.
    expect(await rcode(`sys.kube-system.svc.${ZONE}`, "insecure")).toBe("NOERROR");
    expect(await rcode(`sys.kube-system.svc.${ZONE}`, "options")).toBe("NXDOMAIN");
    // endpoint_pod_names: an endpoint without a hostname is named by its pod.
    expect(rrs((await ask(`db-pod-6.db.default.svc.${ZONE}`, QTYPE.A, "options")).answer)).toEqual([
      `db-pod-6.db.default.svc.${ZONE}. 30 A 10.1.0.6`,
    ]);
    expect(await rcode(`db-pod-6.db.default.svc.${ZONE}`, "insecure")).toBe("NXDOMAIN");
    // ignore empty_service: a cluster-IP Service without a ready endpoint (web has no EndpointSlice).
    expect(await rcode(`web.default.svc.${ZONE}`, "options")).toBe("NXDOMAIN");
    // ttl 30: the records' TTL, the SOA's minimum and its own TTL.
    const nx = await ask(`nope.default.svc.${ZONE}`, QTYPE.A, "options");
    expect(nx.authority[0]).toMatchObject({ ttl: 30 });
    expect(nx.authority[0]?.data).toMatch(/ 7200 1800 86400 30$/);
  });
});
