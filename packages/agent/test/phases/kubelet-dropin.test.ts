import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { createTestCa, FIXTURE_NODE_PACKAGE, fakeHost, freePorts, nodeConfig, tempDir } from "./helpers.ts";
import { reconcileUntilOk, wholeNode } from "./whole-node.ts";

/**
 * What the kubelet and kube-apiserver phases hand the strict stand-ins of each Kubernetes minor:
 * a whole master brought to ok with a node package of 1.29 and of 1.31. From 1.30 the dynamic
 * kubelet settings go to a --config-dir drop-in; in 1.29 (drop-ins still alpha there) they stay
 * in the --config file. The stand-ins exit on any flag the real binary of that minor refuses, so
 * reaching ok is the proof that the command lines are accepted.
 */
const roots: string[] = [];
const supervisors: DirectSupervisor[] = [];
afterAll(() => {
  for (const s of supervisors) s.close();
  for (const root of roots) {
    killAllFromPidFiles(join(root, "host"));
    rmSync(root, { recursive: true, force: true });
  }
});

function cmdline(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
}

async function masterOn(minor: number, ip: string) {
  const root = tempDir(`dropin-1-${minor}`);
  roots.push(root);
  const pkg = join(root, "package");
  cpSync(FIXTURE_NODE_PACKAGE, pkg, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(pkg, "manifest.json"), "utf8"));
  writeFileSync(
    join(pkg, "manifest.json"),
    JSON.stringify({ ...manifest, kubernetesVersion: `v1.${minor}.0-keelson-standin` }),
  );
  const ca = await createTestCa(join(root, "test-ca"));
  const config = nodeConfig({
    hostRoot: join(root, "host"),
    primaryIp: ip,
    nodePackage: pkg,
    ports: await freePorts(ip),
    cluster: { servicesCidr: "10.21.0.0/16", topologyManagerPolicy: "best-effort", privileged: true },
    host: fakeHost(root),
  });
  const { services, engine } = wholeNode(root, config, ca.signCsr);
  supervisors.push(services);
  await reconcileUntilOk(engine);
  expect(engine.nodeStatus).toBe("ok");
  const pids = services.livePids();
  return { config, pids, kubeDir: join(config.hostRoot, "etc", "kubernetes") };
}

describe("the master's command lines per Kubernetes minor", () => {
  it("1.31: kubelet with --config-dir and the dynamic settings in a drop-in; apiserver with the required flags", async () => {
    const { pids, kubeDir, config } = await masterOn(31, "127.0.0.71");
    const kubelet = cmdline(pids.kubelet as number);
    expect(kubelet).toContain(`--config-dir=${join(kubeDir, "kubelet.conf.d")}`);
    expect(kubelet.some((a) => a.startsWith("--dynamic-config-dir"))).toBe(false);
    const dropIn = JSON.parse(readFileSync(join(kubeDir, "kubelet.conf.d", "50-keelson-dynamic.conf"), "utf8"));
    expect(dropIn).toMatchObject({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      topologyManagerPolicy: "best-effort",
    });
    const api = cmdline(pids["kube-apiserver"] as number);
    for (const flag of [
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--authorization-mode=Node,RBAC",
      "--enable-admission-plugins=NodeRestriction",
      "--allow-privileged=true",
      `--service-cluster-ip-range=${config.cluster.servicesCidr}`,
    ]) {
      expect(api).toContain(flag);
    }
    const pki = join(config.hostRoot, "etc", "keelson", "pki");
    expect(api).toContain(`--service-account-signing-key-file=${join(pki, "service-account.key")}`);
    expect(api).toContain(`--kubelet-client-certificate=${join(pki, "apiserver-kubelet-client.crt")}`);
    expect(existsSync(join(pki, "service-account.pub"))).toBe(true);
  }, 90_000);

  it("1.29: no --config-dir (alpha there); the settings are in the --config file", async () => {
    const { pids, kubeDir } = await masterOn(29, "127.0.0.72");
    const kubelet = cmdline(pids.kubelet as number);
    expect(kubelet.some((a) => a.startsWith("--config-dir") || a.startsWith("--dynamic-config-dir"))).toBe(false);
    expect(existsSync(join(kubeDir, "kubelet.conf.d", "50-keelson-dynamic.conf"))).toBe(false);
    const config = JSON.parse(readFileSync(join(kubeDir, "kubelet-config.json"), "utf8"));
    expect(config.topologyManagerPolicy).toBe("best-effort");
  }, 90_000);
});
