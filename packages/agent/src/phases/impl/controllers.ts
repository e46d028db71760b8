import { urlHost } from "@keelson/protocol";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import type { ServiceSpec } from "../../services/types.ts";
import type { PhaseContext } from "../types.ts";
import { configuredServiceEnv } from "./common.ts";

/**
 * kube-controller-manager and kube-scheduler on a master, as supervised services (where kubeadm
 * runs static pods): each with its own client certificate and kubeconfig towards this master's
 * API server, leader election on (one of the masters' copies works at a time), and its secure
 * port (also serving /healthz, checked over TLS against the cluster CA) on the primary IP, so
 * masters sharing a machine in tests do not collide on 127.0.0.1.
 */

/** The flags both take for serving and for delegated authentication/authorization. */
function servingArgs(
  ctx: PhaseContext,
  profile: "kube-controller-manager" | "kube-scheduler",
  port: number,
  kubeconfig: string,
) {
  const { config, paths } = ctx;
  return [
    `--bind-address=${config.primaryIp}`,
    `--secure-port=${port}`,
    `--tls-cert-file=${paths.cert(profile)}`,
    `--tls-private-key-file=${paths.key(profile)}`,
    `--client-ca-file=${paths.caCert}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    "--leader-elect=true",
  ];
}

function health(ctx: PhaseContext, port: number): ServiceSpec["health"] {
  return {
    kind: "http",
    url: `https://${urlHost(ctx.config.primaryIp)}:${port}/healthz`,
    ca: readTextOrUndefined(ctx.paths.caCert),
  };
}

export function controllerManagerSpec(ctx: PhaseContext): ServiceSpec {
  const { config, paths } = ctx;
  const port = config.ports.controllerManager;
  const kubeconfig = paths.controllerManagerKubeconfig;
  return {
    name: "kube-controller-manager",
    description: "Kubernetes controller manager",
    command: ctx.binary("kube-controller-manager"),
    args: [
      `--kubeconfig=${kubeconfig}`,
      ...servingArgs(ctx, "kube-controller-manager", port, kubeconfig),
      // The certificates API signs with the cluster's signing CA (an intermediate of the cluster
      // CA, delivered with this certificate; the cluster CA's own key stays in the control plane).
      `--cluster-signing-cert-file=${paths.clusterSigningCert}`,
      `--cluster-signing-key-file=${paths.clusterSigningKey}`,
      // Node pod CIDRs for flannel, carved from the cluster's container range.
      "--allocate-node-cidrs=true",
      `--cluster-cidr=${config.cluster.containersCidr}`,
      `--service-cluster-ip-range=${config.cluster.servicesCidr}`,
      `--service-account-private-key-file=${paths.serviceAccountKey}`,
      `--root-ca-file=${paths.caCert}`,
      "--use-service-account-credentials=true",
    ],
    env: configuredServiceEnv(kubeconfig, paths.clusterSigningCert, paths.serviceAccountKey),
    health: health(ctx, port),
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

export function schedulerSpec(ctx: PhaseContext): ServiceSpec {
  const { config, paths } = ctx;
  const port = config.ports.scheduler;
  return {
    name: "kube-scheduler",
    description: "Kubernetes scheduler",
    command: ctx.binary("kube-scheduler"),
    args: [`--config=${paths.schedulerConfig}`, ...servingArgs(ctx, "kube-scheduler", port, paths.schedulerKubeconfig)],
    env: configuredServiceEnv(paths.schedulerConfig, paths.schedulerKubeconfig),
    health: health(ctx, port),
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

/** The master's controller services, in start order. */
export const CONTROLLERS = [
  { spec: controllerManagerSpec, port: (ctx: PhaseContext) => ctx.config.ports.controllerManager },
  { spec: schedulerSpec, port: (ctx: PhaseContext) => ctx.config.ports.scheduler },
] as const;
export const CONTROLLER_SERVICES = ["kube-controller-manager", "kube-scheduler"] as const;
