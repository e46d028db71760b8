import { describe, expect, it } from "vitest";
import { buildNodeConfig } from "../../src/node/node-config.ts";
import type { NodeConfigInput } from "../../src/phases/config.ts";
import { nodeProxyEnv, noProxyEntries } from "../../src/phases/impl/node-proxy.ts";
import { PhaseError } from "../../src/phases/types.ts";
import { nodeConfig } from "./helpers.ts";

/**
 * The node's proxy environment (node-proxy.ts), computed from the cluster's fields: containerd
 * gets HTTP_PROXY/HTTPS_PROXY and a NO_PROXY that keeps the cluster's own traffic direct.
 */

const PROXY = "http://proxy.example.com:3128";
const config = (input: Partial<NodeConfigInput> & { primaryIp: string }) => nodeConfig({ hostRoot: "/h", ...input });

describe("the node's proxy environment", () => {
  it("is empty when the cluster has no proxy", () => {
    expect(nodeProxyEnv(config({ primaryIp: "10.0.0.5" }))).toEqual({});
    expect(nodeProxyEnv(config({ primaryIp: "10.0.0.5", cluster: { httpProxy: "" } }))).toEqual({});
  });

  it("a master: the proxy for both schemes, NO_PROXY from loopback, its address, the ranges, the VIP, the DNS name and the cluster's names", () => {
    const env = nodeProxyEnv(
      config({
        primaryIp: "10.0.0.5",
        cluster: {
          httpProxy: PROXY,
          containersCidr: "10.20.0.0/16",
          servicesCidr: "10.21.0.0/16",
          masterVipIpv4: "10.0.0.100",
          externalDnsName: "API.Example.com.",
        },
      }),
    );
    expect(env).toEqual({
      HTTP_PROXY: PROXY,
      HTTPS_PROXY: PROXY,
      // The master's API server is its own address: listed once.
      NO_PROXY:
        "localhost,127.0.0.1,::1,10.0.0.5,10.20.0.0/16,10.21.0.0/16,10.0.0.100,api.example.com,.svc,.cluster.local",
    });
  });

  it("a worker: the API server it is given, the cluster's default ranges when the spec has none", () => {
    const worker = config({
      primaryIp: "10.0.0.7",
      role: "worker",
      apiServerUrl: "https://api.internal:6443",
      cluster: { httpProxy: PROXY },
    });
    expect(noProxyEntries(worker).join(",")).toBe(
      "localhost,127.0.0.1,::1,10.0.0.7,10.20.0.0/16,10.21.0.0/16,api.internal,.svc,.cluster.local",
    );
  });

  it("IPv6: the node's and the API's addresses unbracketed, in one compressed form, each once", () => {
    const worker = config({
      primaryIp: "FD00:0:0::7",
      role: "worker",
      apiServerUrl: "https://[fd00::0:7]:6443",
      cluster: { httpProxy: "http://[fd00::3128]:3128", containersCidr: "10.20.0.0/16,fd00:20::/56" },
    });
    const entries = noProxyEntries(worker);
    expect(entries.slice(0, 6)).toEqual(["localhost", "127.0.0.1", "::1", "fd00::7", "10.20.0.0/16", "fd00:20::/56"]);
    expect(entries.filter((e) => e === "fd00::7")).toHaveLength(1);
    expect(new Set(entries).size).toBe(entries.length);
    expect(nodeProxyEnv(worker).HTTPS_PROXY).toBe("http://[fd00::3128]:3128");
  });

  it("no duplicates: the VIP that is also the API server, a range written twice, loopback as the node's address", () => {
    const entries = noProxyEntries(
      config({
        primaryIp: "127.0.0.1",
        role: "worker",
        apiServerUrl: "https://10.0.0.100:443",
        cluster: { httpProxy: PROXY, masterVipIpv4: "10.0.0.100", containersCidr: "10.20.0.0/16,10.20.0.0/16" },
      }),
    );
    expect(entries.join(",")).toBe("localhost,127.0.0.1,::1,10.20.0.0/16,10.21.0.0/16,10.0.0.100,.svc,.cluster.local");
  });

  it("the private registries' hosts, as containerd's mirrors name them, each once and without port or path", () => {
    const entries = noProxyEntries(
      config({
        primaryIp: "10.0.0.5",
        role: "worker",
        apiServerUrl: "https://10.0.0.100:443",
        cluster: {
          httpProxy: PROXY,
          dockerPrivateRegistry: "Registry.Internal:5000",
          quayPrivateRegistry: "https://registry.internal/quay",
          gcrPrivateRegistry: "http://[fd00::50]:5000/",
          k8sPrivateRegistry: "10.0.0.50:5000/k8s",
        },
      }),
    );
    expect(entries.join(",")).toBe(
      "localhost,127.0.0.1,::1,10.0.0.5,10.20.0.0/16,10.21.0.0/16,10.0.0.100,registry.internal,fd00::50,10.0.0.50,.svc,.cluster.local",
    );
  });

  it("takes host:port as curl and Go do, as http://, and gives containerd the URL with its scheme", () => {
    const env = nodeProxyEnv(config({ primaryIp: "10.0.0.5", cluster: { httpProxy: "proxy.example.com:3128" } }));
    expect(env.HTTP_PROXY).toBe("http://proxy.example.com:3128");
    expect(env.HTTPS_PROXY).toBe("http://proxy.example.com:3128");
  });

  it("refuses a proxy that is not a proxy URL, with the API's rule", () => {
    for (const bad of ["ftp://proxy:21", "http://proxy:3128/path", "proxy:3128/path"]) {
      const broken = config({ primaryIp: "10.0.0.5", cluster: { httpProxy: bad } });
      expect(() => nodeProxyEnv(broken)).toThrow(PhaseError);
      expect(() => nodeProxyEnv(broken)).toThrow(`the cluster's httpProxy must be an http:// or https:// proxy URL`);
    }
  });

  it("the join's settings carry httpProxy to the node's config as the control plane stores it", () => {
    const join = {
      clusterId: "c1",
      clusterName: "c",
      role: "worker" as const,
      kubeRoleVersion: "1.31.4-kls.1",
      settings: { httpProxy: PROXY, containersCidr: "10.30.0.0/16" },
      masterVipVrouterId: "",
      caCertPem: "-",
      apiEndpoint: "https://10.0.0.100:443",
      etcdMembers: [],
    };
    const built = buildNodeConfig(
      { version: 1, join, hostname: "h", primaryIp: "10.0.0.9", joinedAt: "" },
      { hostId: "n1", nodePackage: "/p", hostRoot: "/h" },
    );
    expect(nodeProxyEnv(built)).toMatchObject({
      HTTPS_PROXY: PROXY,
      NO_PROXY: expect.stringContaining("10.0.0.9,10.30.0.0/16,10.21.0.0/16,10.0.0.100,"),
    });
  });
});
