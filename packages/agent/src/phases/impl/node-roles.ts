import { allowsWorkloadsOnMaster } from "../config.ts";
import type { KubeNode, Taint } from "../kube-api.ts";
import type { PhaseContext } from "../types.ts";

/**
 * The labels and taints that say a node's role, and who sets them.
 *
 * Who may do what to a Node, on a real kube-apiserver with --authorization-mode=Node,RBAC and
 * NodeRestriction (plugin/pkg/admission/noderestriction/admission.go): a kubelet registers its
 * own Node with labels outside kubernetes.io and with taints; afterwards it may change neither
 * its taints nor a kubernetes.io label outside the kubelet's set (node-role.kubernetes.io/* is
 * outside it), and it may not delete its Node at all. So:
 * - the kubelet registers with what it may set (kubeletNodeLabels, kubeletRegisterTaints:
 *   --node-labels and --register-with-taints, as kubeadm registers a control-plane node);
 * - the role labels, taint changes and Node deletion are the masters' work, done with their
 *   control-plane credential (ctx.masterKubeApi): a master labels and taints its own Node, and
 *   gives the worker label to the workers of its cluster (the Nodes whose kubelet registered
 *   keelson.io/role=worker), as kubeadm's mark-control-plane and k3s's servers do; a master
 *   leaving deletes its own Node; a worker leaving cannot, so its kubelet marks its own Node
 *   (DETACHED_LABEL, a label outside kubernetes.io that NodeRestriction lets it set) and a
 *   master deletes Nodes so marked (node-sweep.ts). The mark lives in the API itself, so it
 *   outlasts any master that is down when the worker leaves: whichever master sweeps next (its
 *   status pass, or at once when the control plane asks) removes the Node. A host that comes
 *   back clears its mark before its kubelet starts;
 * - a worker holds no credential beyond its kubelet's: it checks and waits.
 * Why not give every node a narrower credential of its own with an RBAC role on nodes: RBAC
 * cannot keep it to its own Node's labels, so a compromised worker could untaint itself or take
 * the master role and steer workloads onto itself, which is what NodeRestriction prevents. A
 * kubelet that claims keelson.io/role=master only goes without the worker label: the master
 * labels are set by a master on its own Node alone. The masters use the system:masters client
 * certificate they already hold (bootstrap-objects.ts does the same): a master keeps
 * system:masters keys anyway (etcd, the kubelet client), so a narrower certificate there would
 * not narrow what a compromised master can do.
 */

export const ROLE_TAINT_KEYS = ["node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"];
export const WORKER_LABEL = "node-role.kubernetes.io/worker";
/** Set by a leaving worker's kubelet on its own Node: a master deletes the Node (node-sweep.ts). */
export const DETACHED_LABEL = "keelson.io/detached";

/** The labels the kubelet registers its Node with (none under kubernetes.io: it may not set those). */
export function kubeletNodeLabels(ctx: PhaseContext): Record<string, string> {
  return {
    "keelson.io/cluster": ctx.config.clusterId,
    "keelson.io/node": ctx.config.nodeId,
    "keelson.io/role": ctx.config.role,
  };
}

export function desiredLabels(ctx: PhaseContext): Record<string, string> {
  const labels: Record<string, string> = {
    ...kubeletNodeLabels(ctx),
    [`node-role.kubernetes.io/${ctx.config.role}`]: "",
  };
  if (ctx.config.role === "master") labels["node-role.kubernetes.io/control-plane"] = "";
  return labels;
}

/** Our role taints: NoSchedule on masters unless the cluster allows workloads there. */
export function desiredRoleTaints(ctx: PhaseContext): Taint[] {
  if (ctx.config.role !== "master" || allowsWorkloadsOnMaster(ctx.config.cluster)) return [];
  return ROLE_TAINT_KEYS.map((key) => ({ key, effect: "NoSchedule" as const }));
}

/** --register-with-taints: a master is tainted from its first moment, before node-taints runs. */
export function kubeletRegisterTaints(ctx: PhaseContext): string[] {
  return desiredRoleTaints(ctx).map((t) => `${t.key}:${t.effect}`);
}

/** Other taints (the user's, the cloud's) stay; only the role taints are ours to set. */
export function withRoleTaints(node: KubeNode, wanted: Taint[]): Taint[] {
  return [...(node.spec?.taints ?? []).filter((t) => !ROLE_TAINT_KEYS.includes(t.key)), ...wanted];
}
