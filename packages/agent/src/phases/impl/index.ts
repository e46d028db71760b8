import type { Phase } from "../types.ts";
import { nodeBouncer } from "./bouncer.ts";
import { genCerts } from "./certs.ts";
import { miscChecks } from "./checks.ts";
import { configureEtcd, startEtcd } from "./etcd.ts";
import { kubelet, kubeProxy, waitForServices } from "./kube-services.ts";
import { appCatalog, coredns, keepalived } from "./masters.ts";
import { configureCni, networkConfig } from "./network.ts";
import { drainPods, dynamicKubeletConfig, nodeTaints, uncordon } from "./node-api.ts";
import { prepareConfig } from "./prepare-config.ts";
import { configureRuntime, loadUserImages, startRuntime } from "./runtime.ts";

/** Every phase implementation, in catalogue order (the engine picks a role's own). */
export const ALL_PHASES: Phase[] = [
  genCerts,
  prepareConfig,
  configureRuntime,
  startRuntime,
  loadUserImages,
  configureEtcd,
  startEtcd,
  networkConfig,
  configureCni,
  nodeBouncer,
  miscChecks,
  kubelet,
  kubeProxy,
  waitForServices,
  nodeTaints,
  dynamicKubeletConfig,
  uncordon,
  appCatalog,
  keepalived,
  coredns,
  drainPods,
];
