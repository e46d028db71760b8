import { rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { urlHost } from "@keelson/protocol";
import { readTextOrUndefined, writeFileAtomic } from "../../services/atomic-file.ts";
import { httpGet } from "../../services/probe.ts";
import type { KubeNode, Taint } from "../kube-api.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { type DesiredFile, definePhase, expectFiles, writeFiles } from "./common.ts";
import { kubeletMinor, kubeletTakesConfigDir } from "./kube-services.ts";
import { desiredLabels, desiredRoleTaints, kubeletNodeLabels, ROLE_TAINT_KEYS, withRoleTaints } from "./node-roles.ts";
import { sweepNodes, sweepNote } from "./node-sweep.ts";
import { cpuSettings, renderKubeletConfig } from "./render.ts";

/**
 * The phases that talk to the cluster's Kubernetes API about this node: taints and labels,
 * dynamic kubelet configuration, uncordon (only a cordon Keelson made: a marker file records
 * it), and the stop-only drain (cordon, then evict every pod that is not a DaemonSet's).
 * Who may set what on a Node, and so which credential each step uses: node-roles.ts.
 */

async function requireNode(ctx: PhaseContext): Promise<KubeNode> {
  const node = await ctx.kubeApi.getNode(ctx.config.nodeName, ctx.signal);
  if (!node) throw new PhaseError(`node ${ctx.config.nodeName} is not registered with ${ctx.kubeApi.url}`);
  return node;
}

const sameTaint = (a: Taint, b: Taint) => a.key === b.key && a.effect === b.effect;

function taintProblems(ctx: PhaseContext, node: KubeNode): string[] {
  const problems: string[] = [];
  const labels = node.metadata.labels ?? {};
  for (const [key, value] of Object.entries(desiredLabels(ctx))) {
    if (labels[key] !== value) problems.push(`label ${key}=${value} missing`);
  }
  const ours = (node.spec?.taints ?? []).filter((t) => ROLE_TAINT_KEYS.includes(t.key));
  const wanted = desiredRoleTaints(ctx);
  for (const taint of wanted) {
    if (!ours.some((t) => sameTaint(t, taint))) problems.push(`taint ${taint.key}:${taint.effect} missing`);
  }
  for (const taint of ours) {
    if (!wanted.some((t) => sameTaint(t, taint))) {
      problems.push(
        `taint ${taint.key}:${taint.effect} should not be there${ctx.config.role === "master" ? " (allowWorkloadsOnMaster)" : ""}`,
      );
    }
  }
  return problems;
}

/** A worker waits for a master's sweep (node-sweep.ts): its kubelet may not set its role itself. */
async function awaitMasterLabels(ctx: PhaseContext): Promise<void> {
  const timeoutMs = ctx.config.timeouts.waitForServicesMs;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const problems = taintProblems(ctx, await requireNode(ctx));
    if (problems.length === 0) return;
    if (Date.now() >= deadline) {
      throw new PhaseError(
        `waited ${timeoutMs} ms for a master to label node ${ctx.config.nodeName} (a kubelet may not set its own role or taints): ${problems.join("; ")}`,
      );
    }
    await sleep(500, undefined, { signal: ctx.signal });
  }
}

export const nodeTaints = definePhase({
  id: "node-taints",
  async start(ctx) {
    const node = await requireNode(ctx);
    const own = kubeletNodeLabels(ctx);
    if (ctx.config.role !== "master") {
      // A Node registered before its kubelet had --node-labels: these labels the kubelet may add.
      if (Object.entries(own).some(([k, v]) => node.metadata.labels?.[k] !== v)) {
        await ctx.kubeApi.patchNode(ctx.config.nodeName, { metadata: { labels: own } }, ctx.signal);
      }
      await awaitMasterLabels(ctx);
      return { message: "labelled worker by a master; no role taint" };
    }
    const roleTaints = desiredRoleTaints(ctx);
    const patched = await ctx.masterKubeApi.patchNode(
      ctx.config.nodeName,
      { metadata: { labels: desiredLabels(ctx) }, spec: { taints: withRoleTaints(node, roleTaints) } },
      ctx.signal,
    );
    const problems = taintProblems(ctx, patched);
    if (problems.length > 0) throw new PhaseError(`after patching: ${problems.join("; ")}`);
    const swept = sweepNote(await sweepNodes(ctx));
    const done = roleTaints.length > 0 ? "labelled; master NoSchedule taint set" : "labelled; no role taint";
    return { message: swept ? `${done}; ${swept}` : done };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    const problems = taintProblems(ctx, await requireNode(ctx));
    if (problems.length > 0) throw new PhaseError(problems.join("; "));
    if (ctx.config.role !== "master") return undefined;
    // Workers that joined or left since are handled here, not reported: they are not this
    // master's state, and a failing master status would roll this master back to converging
    // for another node.
    const swept = sweepNote(await sweepNodes(ctx));
    return swept ? { message: swept } : undefined;
  },
});

/**
 * The cluster's kubelet settings that may change while the node runs, written the way the
 * package's kubelet takes them: from Kubernetes 1.30 a drop-in of its --config-dir (a whole
 * KubeletConfiguration object; only *.conf files count, merged in name order over --config);
 * before that the --config file itself, rewritten. Either way the kubelet reads it at start
 * only, so a change means a restart (dynamic kubelet configuration was removed in 1.24).
 */
function dynamicFile(ctx: PhaseContext, minor: number): DesiredFile {
  if (!kubeletTakesConfigDir(minor)) {
    return { path: ctx.paths.kubeletConfig, content: renderKubeletConfig(ctx.config, ctx.paths) };
  }
  const dropIn = {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    ...cpuSettings(ctx.config),
  };
  return {
    path: join(ctx.paths.kubeletConfigDir, "50-keelson-dynamic.conf"),
    content: `${JSON.stringify(dropIn, null, 2)}\n`,
  };
}

/** What the running kubelet reports it uses (/configz on its TLS port), compared with the file. */
async function kubeletDisagrees(ctx: PhaseContext): Promise<string | undefined> {
  const { config, paths } = ctx;
  const host = urlHost(config.primaryIp);
  const url = `https://${host}:${config.ports.kubelet}/configz`;
  let live: Record<string, unknown>;
  try {
    const answer = await httpGet(
      {
        kind: "http",
        url,
        ca: readTextOrUndefined(paths.caCert),
        cert: readTextOrUndefined(paths.cert("kubelet")),
        key: readTextOrUndefined(paths.key("kubelet")),
        timeoutMs: 3000,
      },
      ctx.signal,
    );
    if (answer.status !== 200) return `${url} answered ${answer.status}`;
    live = (JSON.parse(answer.body) as { kubeletconfig: Record<string, unknown> }).kubeletconfig;
  } catch (err) {
    return `${url}: ${(err as Error).message}`;
  }
  const wanted = cpuSettings(config);
  const differing = Object.entries(wanted).filter(([key, value]) => live[key] !== value);
  if (differing.length === 0) return undefined;
  return `the kubelet runs with ${differing.map(([k]) => `${k}=${JSON.stringify(live[k])}`).join(", ")}, wanted ${differing.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")}`;
}

export const dynamicKubeletConfig = definePhase({
  id: "dynamic-kubelet-config",
  async start(ctx) {
    writeFiles([dynamicFile(ctx, await kubeletMinor(ctx))]);
    const before = await kubeletDisagrees(ctx);
    if (!before) return { message: "kubelet runs with the cluster's settings" };
    ctx.log.info({ reason: before }, "restarting kubelet to apply its dynamic configuration");
    await ctx.services.restart("kubelet");
    await ctx.services.waitHealthy("kubelet", { timeoutMs: ctx.config.timeouts.serviceStartMs, signal: ctx.signal });
    const after = await kubeletDisagrees(ctx);
    if (after) throw new PhaseError(`applied, but ${after}`);
    return { message: "applied (kubelet restarted)" };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    expectFiles([dynamicFile(ctx, await kubeletMinor(ctx))]);
    const problem = await kubeletDisagrees(ctx);
    if (problem) throw new PhaseError(problem);
    return undefined;
  },
});

function keelsonCordoned(ctx: PhaseContext): boolean {
  return readTextOrUndefined(ctx.paths.cordonMarker) !== undefined;
}

export const uncordon = definePhase({
  id: "uncordon",
  async start(ctx) {
    const node = await requireNode(ctx);
    if (!node.spec?.unschedulable) {
      rmSync(ctx.paths.cordonMarker, { force: true });
      return { message: "schedulable" };
    }
    if (!keelsonCordoned(ctx)) {
      return { message: "left cordoned: the cordon was not made by Keelson (uncordon it with kubectl when ready)" };
    }
    await ctx.kubeApi.patchNode(ctx.config.nodeName, { spec: { unschedulable: false } }, ctx.signal);
    rmSync(ctx.paths.cordonMarker, { force: true });
    return { message: "uncordoned (Keelson had cordoned it)" };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    const node = await requireNode(ctx);
    if (!node.spec?.unschedulable) return undefined;
    if (keelsonCordoned(ctx)) throw new PhaseError("still cordoned by Keelson");
    return { message: "cordoned by a user: left as is" };
  },
});

export const drainPods = definePhase({
  id: "drain-pods",
  async start() {
    return { message: "stop-only phase" };
  },
  async status() {
    return { message: "stop-only phase" };
  },
  async stop(ctx) {
    const node = await ctx.kubeApi.getNode(ctx.config.nodeName, ctx.signal);
    if (!node) return { message: "node not registered: nothing to drain" };
    if (!node.spec?.unschedulable) {
      // Record the cordon before making it, so a crash in between never leaves a cordon
      // that looks like the user's.
      writeFileAtomic(ctx.paths.cordonMarker, `${new Date().toISOString()}\n`);
      await ctx.kubeApi.patchNode(ctx.config.nodeName, { spec: { unschedulable: true } }, ctx.signal);
    }
    const evictable = async () =>
      (await ctx.kubeApi.listPodsOnNode(ctx.config.nodeName, ctx.signal)).filter((p) => p.ownerKind !== "DaemonSet");
    const pods = await evictable();
    for (const pod of pods) await ctx.kubeApi.evictPod(pod, ctx.signal);
    const deadline = Date.now() + ctx.config.timeouts.waitForServicesMs;
    for (let left = await evictable(); left.length > 0; left = await evictable()) {
      if (Date.now() > deadline) {
        throw new PhaseError(
          `pods still on the node after eviction: ${left.map((p) => `${p.namespace}/${p.name}`).join(", ")}`,
        );
      }
      await sleep(500, undefined, { signal: ctx.signal });
    }
    return { message: `cordoned; evicted ${pods.length} pod(s)` };
  },
});
