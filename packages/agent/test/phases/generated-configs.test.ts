import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { bouncerFiles } from "../../src/phases/impl/bouncer.ts";
import type { DesiredFile } from "../../src/phases/impl/common.ts";
import { renderCorefile } from "../../src/phases/impl/masters.ts";
import { prepareConfigFiles } from "../../src/phases/impl/render.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { PhaseContext } from "../../src/phases/types.ts";
import { FIXTURE_NODE_PACKAGE, nodeConfig, tempDir } from "./helpers.ts";

/**
 * What the phases write passes the test node package's strict decoders (the real components'
 * rules, with their sources in test/fixtures/node-package/lib): KubeSchedulerConfiguration and
 * the Corefile are refused on any unknown field or directive; KubeletConfiguration and
 * KubeProxyConfiguration v1alpha1 are decoded leniently by the real binaries, so "passes" means
 * no strict-decoding warning; every kubeconfig loads as client-go's clientcmd loads it.
 */

interface Decoders {
  scheduler: { decodeSchedulerConfig(path: string): unknown };
  proxy: { decodeKubeProxyConfig(path: string): { warnings: string[] } };
  kubelet: { decodeKubeletConfig(path: string, minor: number): { warnings: string[] } };
  corefile: { checkCorefile(text: string, path: string): unknown };
  kubeconfig: { kubeconfigErrors(path: string): string[] };
}

const lib = (name: string) => import(pathToFileURL(join(FIXTURE_NODE_PACKAGE, "lib", name)).href);
const root = tempDir("generated-configs");
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the configuration files the phases write", async () => {
  const d: Decoders = {
    scheduler: await lib("scheduler-config.mjs"),
    proxy: await lib("kube-proxy-config.mjs"),
    kubelet: await lib("kubelet-config.mjs"),
    corefile: await lib("coredns-kubernetes.mjs"),
    kubeconfig: await lib("kubeconfig-check.mjs"),
  };
  const config = nodeConfig({
    hostRoot: join(root, "host"),
    primaryIp: "127.0.0.41",
    cluster: { containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
  });
  const paths = nodePaths(config.hostRoot);
  const ctx = { config, paths } as unknown as PhaseContext;
  const files: DesiredFile[] = [
    ...prepareConfigFiles(config, paths),
    renderCorefile(config, paths),
    ...bouncerFiles(ctx),
  ];
  for (const file of files) {
    mkdirSync(dirname(file.path), { recursive: true });
    writeFileSync(file.path, file.content);
  }
  // The certificate files the kubeconfigs name (their contents are not what is checked here).
  mkdirSync(paths.pki, { recursive: true });
  for (const profile of ["kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"] as const) {
    writeFileSync(paths.cert(profile), "");
    writeFileSync(paths.key(profile), "");
  }
  writeFileSync(paths.caCert, "");

  it("KubeSchedulerConfiguration v1 passes the scheduler's strict decoder, which refuses an unknown field", () => {
    expect(() => d.scheduler.decodeSchedulerConfig(paths.schedulerConfig)).not.toThrow();
    const tampered = join(root, "scheduler-tampered.json");
    const body = JSON.parse(readFileSync(paths.schedulerConfig, "utf8"));
    writeFileSync(tampered, JSON.stringify({ ...body, healthzBindAddress: "0.0.0.0:10251" }));
    expect(() => d.scheduler.decodeSchedulerConfig(tampered)).toThrow(
      'strict decoding error: unknown field "healthzBindAddress"',
    );
  });

  it("KubeProxyConfiguration and KubeletConfiguration carry no field their strict decoders do not know", () => {
    expect(d.proxy.decodeKubeProxyConfig(paths.kubeProxyConfig).warnings).toEqual([]);
    for (const minor of [29, 30, 31]) {
      expect(d.kubelet.decodeKubeletConfig(paths.kubeletConfig, minor).warnings, `1.${minor}`).toEqual([]);
    }
    const tampered = join(root, "proxy-tampered.json");
    const body = JSON.parse(readFileSync(paths.kubeProxyConfig, "utf8"));
    writeFileSync(tampered, JSON.stringify({ ...body, iptables: { masqueradeAll: true, syncPeriodd: "1s" } }));
    expect(d.proxy.decodeKubeProxyConfig(tampered).warnings).toEqual([
      'strict decoding error: unknown field "iptables.syncPeriodd"',
    ]);
  });

  it("the Corefile uses only directives and kubernetes properties CoreDNS knows", () => {
    expect(() => d.corefile.checkCorefile(readFileSync(paths.corefile, "utf8"), paths.corefile)).not.toThrow();
    const text = readFileSync(paths.corefile, "utf8").replace("    cache 30\n", "    cache 30\n    proxy . 8.8.8.8\n");
    const line = text.split("\n").indexOf("    proxy . 8.8.8.8") + 1;
    expect(() => d.corefile.checkCorefile(text, "/etc/coredns/Corefile")).toThrow(
      `/etc/coredns/Corefile:${line} - Error during parsing: Unknown directive 'proxy'`,
    );
    const property = readFileSync(paths.corefile, "utf8").replace("pods insecure", "resyncperiod 10s");
    const at = property.split("\n").indexOf("        resyncperiod 10s") + 1;
    expect(() => d.corefile.checkCorefile(property, "Corefile")).toThrow(
      `plugin/kubernetes: Corefile:${at} - Error during parsing: unknown property 'resyncperiod'`,
    );
  });

  it("every kubeconfig (kubelet, kube-proxy, controllers, the token webhook's) loads as clientcmd loads it", () => {
    const kubeconfigs = [
      paths.kubeletKubeconfig,
      paths.kubeProxyKubeconfig,
      paths.controllerManagerKubeconfig,
      paths.schedulerKubeconfig,
      paths.apiserverWebhookConfig,
    ];
    for (const path of kubeconfigs) expect(d.kubeconfig.kubeconfigErrors(path), path).toEqual([]);
    const broken = join(root, "broken.kubeconfig");
    const body = JSON.parse(readFileSync(paths.apiserverWebhookConfig, "utf8"));
    writeFileSync(broken, JSON.stringify({ ...body, "current-context": "elsewhere" }));
    expect(d.kubeconfig.kubeconfigErrors(broken)).toEqual([
      "invalid configuration: context was not found for specified context: elsewhere",
    ]);
  });
});
