import type { KubeNode } from "../kube-api.ts";
import type { PhaseContext } from "../types.ts";
import { DETACHED_LABEL, ROLE_TAINT_KEYS, WORKER_LABEL, withRoleTaints } from "./node-roles.ts";

/**
 * A master's pass over the other Nodes of its cluster, with its control-plane credential (a
 * kubelet may do neither, node-roles.ts): each Node whose kubelet registered it as a worker gets
 * the worker label (and loses a master role taint someone put there), and each Node whose kubelet
 * marked it as detached when its host left the cluster is deleted. It runs on every master status
 * pass and at once when the control plane asks (`node.sweep`: a worker waits for its label, or
 * left), so nothing here depends on which master, if any, was up at that moment: the mark stays
 * in the API until one of them sweeps.
 */

export interface SweepResult {
  /** Nodes given the worker label (or freed of a master taint). */
  labelled: string[];
  /** Nodes deleted because their host left the cluster. */
  removed: string[];
}

const clusterSelector = (ctx: PhaseContext) => `keelson.io/cluster=${ctx.config.clusterId}`;

async function labelWorkers(ctx: PhaseContext, nodes: KubeNode[]): Promise<string[]> {
  const changed: string[] = [];
  for (const node of nodes) {
    const labels = node.metadata.labels ?? {};
    if (labels["keelson.io/role"] !== "worker" || labels[DETACHED_LABEL] !== undefined) continue;
    const labelled = labels[WORKER_LABEL] === "";
    const roleTainted = (node.spec?.taints ?? []).some((t) => ROLE_TAINT_KEYS.includes(t.key));
    if (labelled && !roleTainted) continue;
    const patch = {
      metadata: { labels: { [WORKER_LABEL]: "" } },
      ...(roleTainted ? { spec: { taints: withRoleTaints(node, []) } } : {}),
    };
    await ctx.masterKubeApi.patchNode(node.metadata.name, patch, ctx.signal);
    changed.push(node.metadata.name);
  }
  return changed;
}

async function removeDetached(ctx: PhaseContext, nodes: KubeNode[]): Promise<string[]> {
  const removed: string[] = [];
  for (const node of nodes) {
    const name = node.metadata.name;
    // This master's own Node goes with its own detach (kube-services.ts), never by a sweep.
    if (node.metadata.labels?.[DETACHED_LABEL] === undefined || name === ctx.config.nodeName) continue;
    await ctx.masterKubeApi.deleteNode(name, ctx.signal);
    removed.push(name);
  }
  return removed;
}

/** One list of the cluster's Nodes, then the changes; returns the names changed. */
export async function sweepNodes(ctx: PhaseContext): Promise<SweepResult> {
  const nodes = await ctx.masterKubeApi.listNodes(clusterSelector(ctx), ctx.signal);
  return { removed: await removeDetached(ctx, nodes), labelled: await labelWorkers(ctx, nodes) };
}

export function sweepNote(result: SweepResult): string {
  const parts = [
    ...(result.labelled.length > 0 ? [`labelled worker(s) ${result.labelled.join(", ")}`] : []),
    ...(result.removed.length > 0 ? [`removed detached node(s) ${result.removed.join(", ")}`] : []),
  ];
  return parts.join("; ");
}

/**
 * A leaving worker's part, with its kubelet's credential (its own Node only): the mark a master's
 * sweep deletes by. Returns what the kubelet phase tells the operator.
 */
export async function markDetached(ctx: PhaseContext): Promise<string> {
  const name = ctx.config.nodeName;
  try {
    if (!(await ctx.kubeApi.getNode(name, ctx.signal))) return `node ${name} was not registered`;
    await ctx.kubeApi.patchNode(name, { metadata: { labels: { [DETACHED_LABEL]: "true" } } }, ctx.signal);
    return `node ${name} marked ${DETACHED_LABEL}=true: a master of the cluster deletes it (a kubelet may not)`;
  } catch (err) {
    return `node ${name} stays registered: it could not be marked for a master to delete (${(err as Error).message}); remove it with kubectl delete node ${name}`;
  }
}

/**
 * A host attached again whose old Node was not swept yet: the mark goes before the kubelet
 * starts (and reuses that Node), or a master would delete the Node of a running member. An API
 * that does not answer yet has no Node to clear for this kubelet either.
 */
export async function clearDetachedMark(ctx: PhaseContext): Promise<void> {
  const name = ctx.config.nodeName;
  let node: KubeNode | undefined;
  try {
    node = await ctx.kubeApi.getNode(name, ctx.signal);
  } catch {
    return;
  }
  if (node?.metadata.labels?.[DETACHED_LABEL] === undefined) return;
  await ctx.kubeApi.patchNode(name, { metadata: { labels: { [DETACHED_LABEL]: null } } }, ctx.signal);
  ctx.log.info({ node: name }, "cleared the detached mark of this host's earlier membership");
}
