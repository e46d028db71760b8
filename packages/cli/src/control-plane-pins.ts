import type { ControlPlanePin } from "@keelson/protocol";
import { ApiRefusal } from "./errors.ts";
import type { Cli, Session } from "./session.ts";

/**
 * The config's `controlPlaneHosts` (spec §4.9 step 4: configure-hosts changes the deployment
 * unit's name-to-IP mapping) set on each host's agent (`PUT /v4/{project}/hosts/{uuid}/controlPlanePins`,
 * the admin's): the agent checks every address answers as the control plane before it keeps
 * any, and links over them at once. Every host is tried; says per host what changed or why not,
 * and answers the hosts that refused.
 */
export async function setControlPlanePins(
  cli: Cli,
  s: Session,
  hosts: readonly { uuid: string; name: string }[],
  pins: readonly ControlPlanePin[],
): Promise<string[]> {
  const refused: string[] = [];
  for (const host of hosts) {
    try {
      const answer: { pins: ControlPlanePin[]; previous: ControlPlanePin[] } = await s.api.json(
        "PUT",
        `/v4/${s.projectId}/hosts/${host.uuid}/controlPlanePins`,
        { body: { pins } },
      );
      const now = text(answer.pins);
      const before = text(answer.previous);
      cli.out.print(
        now === before
          ? `${host.name}: control-plane addresses unchanged (${now})`
          : `${host.name}: control-plane addresses ${now} (were ${before})`,
      );
    } catch (error) {
      if (!(error instanceof ApiRefusal) || error.status === 401 || error.status === 403) throw error;
      cli.out.print(`${host.name}: control-plane addresses not set: ${error.apiMessage}`);
      refused.push(host.name);
    }
  }
  return refused;
}

function text(pins: readonly ControlPlanePin[]): string {
  return pins.length === 0 ? "none: DNS" : pins.map((p) => `${p.name}=${p.ip}`).join(", ");
}
