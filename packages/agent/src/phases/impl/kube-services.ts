import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { urlHost } from "@keelson/protocol";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import type { ServiceSpec } from "../../services/types.ts";
import { CLUSTER_DOMAIN } from "../config.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { applyBootstrapObjects, bootstrapDrift, removeOwnDnsEndpoint } from "./bootstrap-objects.ts";
import { configuredServiceEnv, definePhase, ensureService, expectServiceRunning, servicePhase } from "./common.ts";
import { CONTROLLER_SERVICES, CONTROLLERS } from "./controllers.ts";
import { etcdUrls } from "./etcd.ts";
import { cniFiles } from "./network.ts";
import { kubeletNodeLabels, kubeletRegisterTaints } from "./node-roles.ts";
import { clearDetachedMark, markDetached } from "./node-sweep.ts";

/**
 * kubelet, kube-proxy (and, on masters, the kube-apiserver, kube-controller-manager and
 * kube-scheduler) from the node package as supervised services bound to the primary IP. The
 * masters' services run as services where a real kubelet would run them as static pods; they
 * start in the kubelet phase, before the kubelet, since the kubelet registers the node with the
 * API server.
 */

/**
 * The Kubernetes minor of the node package's kubelet (30 for v1.30.x), from `kubelet --version`
 * as the real binary answers it ("Kubernetes v1.30.4"): what the kubelet may be given depends on it.
 */
export async function kubeletMinor(ctx: PhaseContext): Promise<number> {
  const answer = await ctx.run(ctx.binary("kubelet"), ["--version"], { timeoutMs: 10_000 });
  const minor = /\bv?1\.(\d+)\./.exec(answer.stdout)?.[1];
  if (!minor)
    throw new PhaseError(
      `kubelet --version answered ${JSON.stringify(answer.stdout.trim())}, not a Kubernetes version`,
    );
  return Number(minor);
}

/** The kubelet's drop-in directory (--config-dir): beta and on by default from Kubernetes 1.30. */
export function kubeletTakesConfigDir(minor: number): boolean {
  return minor >= 30;
}

function apiserverSpec(ctx: PhaseContext): ServiceSpec {
  const { config, paths } = ctx;
  return {
    name: "kube-apiserver",
    description: "Kubernetes API server",
    command: ctx.binary("kube-apiserver"),
    args: [
      `--bind-address=${config.primaryIp}`,
      `--advertise-address=${config.primaryIp}`,
      `--secure-port=${config.ports.apiServer}`,
      `--tls-cert-file=${paths.cert("apiserver")}`,
      `--tls-private-key-file=${paths.key("apiserver")}`,
      `--client-ca-file=${paths.caCert}`,
      `--etcd-servers=${etcdUrls(ctx).client}`,
      `--etcd-cafile=${paths.caCert}`,
      `--etcd-certfile=${paths.cert("etcd-client")}`,
      `--etcd-keyfile=${paths.key("etcd-client")}`,
      `--authentication-token-webhook-config-file=${paths.apiserverWebhookConfig}`,
      `--service-cluster-ip-range=${config.cluster.servicesCidr}`,
      // Required since Kubernetes 1.20: without them the real kube-apiserver exits. The key pair
      // is the cluster's one, delivered with the apiserver certificate (certs phase).
      `--service-account-issuer=https://kubernetes.default.svc.${CLUSTER_DOMAIN}`,
      `--service-account-signing-key-file=${paths.serviceAccountKey}`,
      `--service-account-key-file=${paths.serviceAccountPub}`,
      "--authorization-mode=Node,RBAC",
      "--enable-admission-plugins=NodeRestriction",
      `--allow-privileged=${config.cluster.privileged === true}`,
      `--kubelet-client-certificate=${paths.cert("apiserver-kubelet-client")}`,
      `--kubelet-client-key=${paths.key("apiserver-kubelet-client")}`,
      ...(config.cluster.runtimeConfig ? [`--runtime-config=${config.cluster.runtimeConfig}`] : []),
    ],
    env: configuredServiceEnv(paths.apiserverWebhookConfig),
    health: {
      kind: "http",
      url: `https://${urlHost(config.primaryIp)}:${config.ports.apiServer}/readyz`,
      ca: readTextOrUndefined(paths.caCert),
    },
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

function kubeletSpec(ctx: PhaseContext, minor: number): ServiceSpec {
  const { config, paths } = ctx;
  return {
    name: "kubelet",
    description: "kubelet",
    command: ctx.binary("kubelet"),
    args: [
      `--config=${paths.kubeletConfig}`,
      `--kubeconfig=${paths.kubeletKubeconfig}`,
      `--hostname-override=${config.nodeName}`,
      `--node-ip=${config.primaryIp}`,
      // What a kubelet may put on its Node itself, at registration only (node-roles.ts).
      `--node-labels=${Object.entries(kubeletNodeLabels(ctx))
        .map(([k, v]) => `${k}=${v}`)
        .join(",")}`,
      ...(kubeletRegisterTaints(ctx).length > 0
        ? [`--register-with-taints=${kubeletRegisterTaints(ctx).join(",")}`]
        : []),
      // --dynamic-config-dir went in Kubernetes 1.24; the drop-in directory replaces it from 1.30.
      ...(kubeletTakesConfigDir(minor) ? [`--config-dir=${paths.kubeletConfigDir}`] : []),
    ],
    env: configuredServiceEnv(paths.kubeletConfig, paths.kubeletKubeconfig),
    health: { kind: "http", url: `http://${urlHost(config.primaryIp)}:${config.ports.kubeletHealthz}/healthz` },
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

function kubeProxySpec(ctx: PhaseContext): ServiceSpec {
  const { config, paths } = ctx;
  return {
    name: "kube-proxy",
    description: "kube-proxy",
    command: ctx.binary("kube-proxy"),
    args: [`--config=${paths.kubeProxyConfig}`, `--hostname-override=${config.nodeName}`],
    env: configuredServiceEnv(paths.kubeProxyConfig, paths.kubeProxyKubeconfig),
    health: { kind: "http", url: `http://${urlHost(config.primaryIp)}:${config.ports.kubeProxyHealthz}/healthz` },
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

export const kubelet = definePhase({
  id: "kubelet",
  async start(ctx) {
    const notes: string[] = [];
    if (ctx.config.role === "master") {
      const api = await ensureService(ctx, apiserverSpec(ctx), [ctx.config.ports.apiServer]);
      notes.push(`kube-apiserver pid ${api.pid}`);
      for (const controller of CONTROLLERS) {
        const spec = controller.spec(ctx);
        const status = await ensureService(ctx, spec, [controller.port(ctx)]);
        notes.push(`${spec.name} pid ${status.pid}`);
      }
    }
    if (ctx.config.role === "worker") await clearDetachedMark(ctx);
    const status = await ensureService(ctx, kubeletSpec(ctx, await kubeletMinor(ctx)), [
      ctx.config.ports.kubelet,
      ctx.config.ports.kubeletHealthz,
    ]);
    notes.push(`kubelet pid ${status.pid}`);
    return { message: notes.join("; ") };
  },
  async stop(ctx) {
    const marked = ctx.intent === "detach" && ctx.config.role === "worker" ? await markDetached(ctx) : undefined;
    await ctx.services.stop("kubelet");
    let message = marked;
    if (ctx.intent === "detach" && ctx.config.role === "master") {
      // The master leaves the cluster: its Node object goes too, deleted with the masters'
      // credential (a kubelet may not delete its Node) while this master's API still answers.
      try {
        await ctx.masterKubeApi.deleteNode(ctx.config.nodeName, ctx.signal);
        message = `node ${ctx.config.nodeName} removed from the cluster`;
      } catch (err) {
        message = `could not remove node ${ctx.config.nodeName} from the cluster: ${(err as Error).message}`;
      }
    }
    if (ctx.config.role === "master") {
      for (const name of [...CONTROLLER_SERVICES].reverse()) await ctx.services.stop(name);
      await ctx.services.stop("kube-apiserver");
    }
    return message ? { message } : undefined;
  },
  async status(ctx) {
    if (ctx.config.role === "master") {
      for (const name of ["kube-apiserver", ...CONTROLLER_SERVICES]) await expectServiceRunning(ctx, name);
    }
    await expectServiceRunning(ctx, "kubelet");
    return undefined;
  },
});

export const kubeProxy = servicePhase({
  id: "kube-proxy",
  service: "kube-proxy",
  spec: kubeProxySpec,
  ports: (ctx) => [ctx.config.ports.kubeProxyHealthz, ctx.config.ports.kubeProxyMetrics],
  started: (_ctx, status) => `kube-proxy pid ${status.pid}`,
});

/** What must hold before the node is of use; the first unmet condition, or undefined. */
async function unmet(ctx: PhaseContext): Promise<string | undefined> {
  const services = ["containerd", "kubelet", "kube-proxy"];
  if (ctx.config.role === "master") services.push("etcd", "node-bouncer", "kube-apiserver", ...CONTROLLER_SERVICES);
  for (const name of services) {
    const status = await ctx.services.status(name);
    if (status.state !== "running") return `service ${name}: ${status.detail}`;
  }
  for (const file of cniFiles(ctx.config, ctx.paths)) {
    if (!existsSync(file.path)) return `CNI configuration ${file.path}`;
  }
  try {
    await ctx.kubeApi.ready(ctx.signal);
  } catch (err) {
    return `the Kubernetes API at ${ctx.kubeApi.url} to be ready (${(err as Error).message})`;
  }
  try {
    const node = await ctx.kubeApi.getNode(ctx.config.nodeName, ctx.signal);
    if (!node) return `node ${ctx.config.nodeName} to register with ${ctx.kubeApi.url}`;
  } catch (err) {
    return `node ${ctx.config.nodeName} to register (${(err as Error).message})`;
  }
  return undefined;
}

/** Once a master's API answers: the cluster's bootstrap objects (bootstrap-objects.ts). */
async function masterBootstrap(ctx: PhaseContext): Promise<{ message: string } | undefined> {
  if (ctx.config.role !== "master") return undefined;
  const changes = await applyBootstrapObjects(ctx);
  return { message: changes.length > 0 ? changes.join("; ") : "bootstrap objects in place" };
}

export const waitForServices = definePhase({
  id: "wait-for-services",
  async start(ctx) {
    const timeoutMs = ctx.config.timeouts.waitForServicesMs;
    const deadline = Date.now() + timeoutMs;
    let delay = 100;
    for (;;) {
      const waitingFor = await unmet(ctx);
      if (!waitingFor) return await masterBootstrap(ctx);
      if (Date.now() >= deadline) throw new PhaseError(`waited ${timeoutMs} ms; still waiting for ${waitingFor}`);
      await sleep(Math.min(delay, Math.max(0, deadline - Date.now())), undefined, { signal: ctx.signal });
      delay = Math.min(delay * 2, 1000);
    }
  },
  async stop(ctx) {
    if (ctx.config.role !== "master" || ctx.intent !== "detach") return undefined;
    // Leaving for good: this master's CoreDNS no longer serves kube-dns (its API still answers).
    try {
      await removeOwnDnsEndpoint(ctx);
      return { message: "this master's CoreDNS removed from kube-dns" };
    } catch (err) {
      return { message: `could not remove this master from kube-dns: ${(err as Error).message}` };
    }
  },
  async status(ctx) {
    const waitingFor = await unmet(ctx);
    if (waitingFor) throw new PhaseError(`not ready: waiting for ${waitingFor}`);
    const drift = ctx.config.role === "master" ? await bootstrapDrift(ctx) : undefined;
    if (drift) throw new PhaseError(`the cluster's bootstrap objects: ${drift}`);
    return undefined;
  },
});
