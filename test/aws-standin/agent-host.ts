import { rmSync } from "node:fs";
import { type AgentProc, startAgent } from "../e2e/support/agents.ts";
import { tempDir } from "../e2e/support/processes.ts";
import type { InstanceHost, InstanceRecord } from "./world.ts";

/**
 * STAND-IN, for tests: instances that boot a real `keelson-agent`. The launch template's user
 * data is a shell script holding the join token's install command (agent-install.ts); this host
 * takes from it what that command passes the installed agent — the control plane's URL, the
 * join token, over TLS the CA hash, and the proxy settings it exports — and starts `keelson-agent` as test/e2e/support does,
 * listening on the instance's own 127.0.x.y address, named as EC2 names hosts
 * (`ip-127-0-12-1`), its state dir under a temporary directory removed at stop.
 * Running the install script itself is test/e2e/install-agent.test.ts's work; here a hundred
 * instances must boot quickly.
 */
export interface BootedAgent {
  instance: InstanceRecord;
  agent: AgentProc;
}

/** What the install command in user data carries (undefined when it holds none). */
export function installTarget(
  userDataBase64: string,
):
  | { controlPlane: string; joinToken: string; caHash?: string; readsInstanceId: boolean; env: Record<string, string> }
  | undefined {
  const script = Buffer.from(userDataBase64, "base64").toString("utf8");
  const joinToken = script.match(/KEELSON_JOIN_TOKEN='([^']*)'/)?.[1];
  const controlPlane = script.match(/--control-plane '([^']*)'/)?.[1] ?? script.match(/\bcp='([^']*)'/)?.[1];
  if (!joinToken || !controlPlane) return undefined;
  const caHash = script.match(/\bpin='([^']*)'/)?.[1];
  // Proxy settings the script exports for the host (httpProxy of the cluster).
  const env: Record<string, string> = {};
  for (const m of script.matchAll(/^export (HTTPS?_PROXY|NO_PROXY)='([^']*)'$/gm)) env[m[1] as string] = m[2] as string;
  // The script asks the instance metadata service for its instance id (auto deploy's user data);
  // this host answers what that service would: the instance's own id.
  const readsInstanceId = /169\.254\.169\.254\/latest\/meta-data\/instance-id/.test(script);
  return { controlPlane, joinToken, ...(caHash ? { caHash } : {}), readsInstanceId, env };
}

export class AgentInstanceHost implements InstanceHost {
  readonly agents = new Map<string, BootedAgent>();
  /** Instances whose user data held no install command (they boot, run nothing). */
  readonly idle: string[] = [];

  /** `envFor`: env of one instance's agent (a node host's own root, say), beside `extraEnv`. */
  constructor(
    private readonly extraEnv: Record<string, string> = {},
    private readonly envFor?: (instance: InstanceRecord) => Record<string, string>,
  ) {}

  async start(instance: InstanceRecord, userDataBase64: string): Promise<void> {
    const target = installTarget(userDataBase64);
    if (!target) {
      this.idle.push(instance.instanceId);
      return;
    }
    const ip = instance.privateIpAddress;
    const agent = await startAgent({
      name: `ip-${ip.replaceAll(".", "-")}`,
      controlPlane: target.controlPlane,
      joinToken: target.joinToken,
      stateDir: tempDir(`keelson-standin-${instance.instanceId}-`),
      host: ip,
      env: {
        KEELSON_PRIMARY_IP: ip,
        ...(target.caHash ? { KEELSON_CA_HASH: target.caHash } : {}),
        ...(target.readsInstanceId ? { KEELSON_CLOUD_INSTANCE_ID: instance.instanceId } : {}),
        // The install script writes the proxy it ran with into agent.env (the cluster's httpProxy).
        ...target.env,
        ...this.extraEnv,
        ...this.envFor?.(instance),
      },
    });
    this.agents.set(instance.instanceId, { instance, agent });
  }

  async stop(instanceId: string): Promise<void> {
    const booted = this.agents.get(instanceId);
    if (!booted) return;
    this.agents.delete(instanceId);
    await booted.agent.stop("SIGTERM", 10_000);
    rmSync(booted.agent.stateDir, { recursive: true, force: true });
  }
}
