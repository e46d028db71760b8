import {
  type ClusterSettings,
  type HostChecks,
  type NodeConfig,
  type ReconcileOptions,
  resolveNodeConfig,
  type Timeouts,
} from "../phases/index.ts";
import type { AgentSettings } from "../settings.ts";
import type { DesiredState } from "./desired-state.ts";

/**
 * Turns the desired state (what `node.join` said) and this host into the phases' NodeConfig.
 * The cluster settings arrive as the control plane stores the cluster spec, whose field names
 * the phases use as they are.
 */

export interface NodeHost {
  hostId: string;
  nodePackage: string;
  hostRoot: string;
  /** Where the node bouncer asks about bearer tokens (this agent, which asks the control plane). */
  bouncerVerifyUrl?: string;
  /** Test hosts read /proc and /sys from elsewhere (KEELSON_NODE_PROC_ROOT / _SYS_ROOT). */
  hostChecks?: Partial<HostChecks>;
  timeouts?: Partial<Timeouts>;
}

/** The node knobs of the agent's settings (settings.ts); defaults suit production. */
export interface NodeTuning {
  reconcile: Partial<ReconcileOptions>;
  hostChecks: Partial<HostChecks>;
  timeouts: Partial<Timeouts>;
  /** Start with fresh certificates at the next (re)start instead of reusing valid ones. */
  regenerateCerts: boolean;
}

/** The node controller's knobs, from the agent's settings. */
export function nodeTuningOf(s: AgentSettings): NodeTuning {
  return {
    reconcile: {
      checkIntervalMs: s.checkIntervalMs,
      retryIntervalMs: s.retryIntervalMs,
      maxRetryIntervalMs: s.maxRetryIntervalMs,
      retryBudget: s.retryBudget,
      fullRestartEvery: s.fullRestartEvery,
      failedRetryIntervalMs: s.failedRetryIntervalMs,
    },
    timeouts: {
      serviceStartMs: s.serviceStartMs,
      waitForServicesMs: s.waitForServicesMs,
      commandMs: s.commandMs,
      serviceStopMs: s.serviceStopMs,
    },
    hostChecks: { procRoot: s.procRoot, sysRoot: s.sysRoot },
    regenerateCerts: s.regenerateCerts,
  };
}

export function buildNodeConfig(desired: DesiredState, host: NodeHost): NodeConfig {
  const { join } = desired;
  const settings = join.settings as Partial<ClusterSettings> & { useHostname?: unknown };
  const cluster: Partial<ClusterSettings> = {
    ...settings,
    kubeRoleVersion: join.kubeRoleVersion || settings.kubeRoleVersion,
    // The control plane allocates the router id; the spec field may be empty.
    ...(join.masterVipVrouterId ? { masterVipVrouterId: join.masterVipVrouterId } : {}),
  };
  const base = resolveNodeConfig({
    clusterId: join.clusterId,
    nodeId: host.hostId,
    // Kubernetes knows the node by hostname only when the cluster asks for it (spec useHostname).
    nodeName: settings.useHostname === true ? desired.hostname : desired.primaryIp,
    role: join.role,
    primaryIp: desired.primaryIp,
    nodePackage: host.nodePackage,
    hostRoot: host.hostRoot,
    cluster,
    // Other members only: a join re-sent after this master became a member lists it too.
    etcdPeers: join.etcdMembers.filter((m) => m.name !== host.hostId).map((m) => m.clientUrl),
    bouncer: host.bouncerVerifyUrl ? { verifyUrl: host.bouncerVerifyUrl } : undefined,
    host: host.hostChecks,
    timeouts: host.timeouts,
  });
  // Workers reach the cluster's API where the control plane says; a master uses its own.
  if (join.role === "worker" && join.apiEndpoint) return { ...base, apiServerUrl: join.apiEndpoint };
  return base;
}
