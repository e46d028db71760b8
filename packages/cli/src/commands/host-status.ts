import type { Command } from "commander";
import { type Column, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import { listNodes } from "../resolve.ts";
import type { Session } from "../session.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/** `keelson host-status` (spec §4.9): per host its name, IP, UUID, host agent version, kube version and status. */

export interface HostStatus {
  name: string;
  ip: string;
  uuid: string;
  hostAgentVersion: string;
  kubeVersion: string;
  /** The host agent's: `running`, `updating` (a command in progress), or `offline` (agent down or unreachable). */
  status: string;
  nodeStatus: string;
  agentError: string | null;
}

interface HostAgentView {
  id: string;
  host_agent?: { version: string; status: string; error?: string };
}

export const HOST_STATUS_COLUMNS: Column<HostStatus>[] = [
  { header: "NAME", value: (h) => h.name },
  { header: "IP", value: (h) => h.ip },
  { header: "UUID", value: (h) => h.uuid },
  { header: "HOST AGENT", value: (h) => h.hostAgentVersion },
  { header: "KUBE", value: (h) => h.kubeVersion },
  { header: "STATUS", value: (h) => h.status, status: true },
  { header: "NODE", value: (h) => h.nodeStatus, status: true },
  { header: "ERROR", value: (h) => h.agentError ?? "" },
];

/** The project's hosts as host-status shows them: the node records joined with the host records. */
export async function hostStatuses(s: Session): Promise<HostStatus[]> {
  const [nodes, hosts] = await Promise.all([listNodes(s), s.api.get<HostAgentView[]>("/v1/hosts")]);
  const agents = new Map(hosts.map((h) => [h.id, h.host_agent]));
  return nodes.map((n) => {
    const agent = agents.get(n.uuid);
    return {
      name: n.name,
      ip: n.primaryIp,
      uuid: n.uuid,
      hostAgentVersion: agent?.version ?? "",
      kubeVersion: String(n.actualKubeRoleVersion ?? ""),
      status: n.agentConnected ? (agent?.status ?? "running") : "offline",
      nodeStatus: n.status,
      agentError: agent?.error ?? null,
    };
  });
}

export function hostStatusCommand(program: Command, wrap: Wrap): void {
  examples(
    outputOption(
      program
        .command("host-status")
        .description("Per host: name, IP, UUID, host agent version, kube version and status")
        .option("--hosts <names>", "only these hosts (comma-separated names)"),
    ),
    "keelson host-status",
    "keelson host-status --hosts worker-1,worker-2 -o json",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { output: string; hosts?: string };
      const s = await cli.session();
      let rows = await hostStatuses(s);
      if (o.hosts !== undefined) {
        const names = new Set(o.hosts.split(",").map((n) => n.trim()));
        rows = rows.filter((h) => names.has(h.name));
      }
      render(cli.out, formatOf(o), rows, HOST_STATUS_COLUMNS);
    }),
  );
}
