import { rmSync } from "node:fs";
import { join } from "node:path";
import type { ServiceManager } from "../services/types.ts";
import type { NodePaths } from "./paths.ts";

/** Every service the phases may install. */
export const NODE_SERVICES = [
  "coredns",
  "keepalived",
  "kube-proxy",
  "kubelet",
  "kube-scheduler",
  "kube-controller-manager",
  "kube-apiserver",
  "node-bouncer",
  "etcd",
  "containerd",
] as const;

/**
 * Returns a detached node to a clean host: uninstalls the services and removes everything the
 * phases wrote (configuration, certificates, etcd and runtime data). Run after the phases have
 * stopped with the detach intent (which drained the node and left etcd).
 */
export async function cleanNode(paths: NodePaths, services: ServiceManager): Promise<string[]> {
  for (const name of NODE_SERVICES) await services.uninstall(name);
  const removed = [
    paths.keelsonEtc,
    paths.kube,
    join(paths.root, "etc", "containerd"),
    join(paths.root, "etc", "etcd"),
    join(paths.root, "etc", "keepalived"),
    join(paths.root, "etc", "coredns"),
    join(paths.root, "etc", "kube-flannel"),
    paths.modulesLoadConf,
    paths.sysctlConf,
    paths.dockerDaemonJson,
    paths.aptDockerList,
    paths.yumDockerRepo,
    paths.etcdDataDir,
    paths.containerdRoot,
    paths.containerdState,
    paths.keelsonVar,
  ];
  for (const path of removed) rmSync(path, { recursive: true, force: true });
  // Only our CNI files: other software may keep its own in the same directory.
  for (const plugin of ["flannel", "calico", "weave"]) {
    rmSync(join(paths.cniConfDir, `10-keelson-${plugin}.conflist`), { force: true });
  }
  return removed;
}
