import type { Command } from "commander";
import { type Column, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import { findCluster, listNodes, type NodeRecord, pick } from "../resolve.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/** `keelson nodes list`, `hosts list|get` and `join-token create`. */

const NODE_COLUMNS: Column<NodeRecord>[] = [
  { header: "NAME", value: (n) => n.name },
  { header: "UUID", value: (n) => n.uuid },
  { header: "IP", value: (n) => n.primaryIp },
  { header: "ROLE", value: (n) => (n.clusterUuid ? (n.isMaster === 1 ? "master" : "worker") : "") },
  { header: "CLUSTER", value: (n) => n.clusterName ?? "" },
  { header: "STATUS", value: (n) => n.status, status: true },
  { header: "AGENT", value: (n) => (n.agentConnected ? "connected" : "offline") },
];

interface HostRecord {
  id: string;
  info: { hostname: string; arch: string; os_info?: string; responding: boolean; last_response_time?: string | null };
  message: string;
  host_agent?: { version: string; status: string; error?: string };
  extensions?: { interfaces?: { data?: { primary_ip?: string } } };
  nodeStatus: string;
  clusterUuid: string | null;
  [key: string]: unknown;
}

const HOST_COLUMNS: Column<HostRecord>[] = [
  { header: "NAME", value: (h) => h.info.hostname },
  { header: "ID", value: (h) => h.id },
  { header: "IP", value: (h) => h.extensions?.interfaces?.data?.primary_ip ?? "" },
  { header: "ARCH", value: (h) => h.info.arch },
  { header: "RESPONDING", value: (h) => String(h.info.responding), status: true },
  { header: "AGENT", value: (h) => (h.host_agent ? `${h.host_agent.version} ${h.host_agent.status}` : "") },
  { header: "NODE", value: (h) => h.nodeStatus, status: true },
  { header: "CLUSTER", value: (h) => h.clusterUuid ?? "" },
  { header: "MESSAGE", value: (h) => h.message },
];

const hostItems = (hosts: HostRecord[]) => hosts.map((h) => ({ ...h, uuid: h.id, name: h.info.hostname }));

export function hostCommands(program: Command, wrap: Wrap): void {
  const nodes = program.command("nodes").alias("node").description("The project's nodes (hosts as cluster members)");
  examples(
    outputOption(
      nodes
        .command("list")
        .alias("ls")
        .description("List the project's nodes, attached or not")
        .option("--cluster <cluster>", "only the nodes of this cluster (name or uuid)"),
    ),
    "keelson nodes list",
    "keelson nodes list --cluster demo -o json",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { output: string; cluster?: string };
      const s = await cli.session();
      let list = await listNodes(s);
      if (o.cluster) {
        const cluster = await findCluster(s, o.cluster);
        list = list.filter((n) => n.clusterUuid === cluster.uuid);
      }
      render(cli.out, formatOf(o), list, NODE_COLUMNS);
    }),
  );

  const hosts = program.command("hosts").alias("host").description("Host records: what each host's agent reports");
  examples(
    outputOption(hosts.command("list").alias("ls").description("List the hosts (every project's for the admin)")),
    "keelson hosts list",
  ).action(
    wrap(async (cli, options) => {
      const s = await cli.session();
      render(
        cli.out,
        formatOf(options as { output: string }),
        await s.api.get<HostRecord[]>("/v1/hosts"),
        HOST_COLUMNS,
      );
    }),
  );
  examples(
    outputOption(hosts.command("get").argument("<host>", "host name or id").description("Show one host record")),
    "keelson hosts get worker-1 -o yaml",
  ).action(
    wrap(async (cli, ref, options) => {
      const s = await cli.session();
      const host = pick(hostItems(await s.api.get<HostRecord[]>("/v1/hosts")), ref as string, "host");
      const full = await s.api.get<HostRecord>(`/v1/hosts/${host.id}`);
      render(cli.out, formatOf(options as { output: string }), full, HOST_COLUMNS);
    }),
  );

  const joinToken = program.command("join-token").description("One-time tokens agents register with");
  examples(
    outputOption(
      joinToken
        .command("create")
        .description("Issue a join token for a new host (table output: the token alone, for scripts)")
        .option("--expires-in-minutes <n>", "lifetime in minutes", (v) => Number.parseInt(v, 10)),
    ),
    "JOIN=$(keelson join-token create)",
    "keelson join-token create --expires-in-minutes 30 -o json",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { output: string; expiresInMinutes?: number };
      const s = await cli.session();
      const body = o.expiresInMinutes === undefined ? {} : { expiresInMinutes: o.expiresInMinutes };
      const issued = await s.api.json<{ token: string; expiresAt: string; installCommand?: string | null }>(
        "POST",
        `/v1/projects/${s.projectId}/joinTokens`,
        { body },
      );
      const format = formatOf(o);
      if (format !== "table") return render(cli.out, format, issued, []);
      cli.out.print(issued.token);
      cli.out.note(`expires at ${issued.expiresAt}; start the agent with KEELSON_JOIN_TOKEN set to it`);
      if (issued.installCommand)
        cli.out.note(`or install it: paste this on the new host, as root:\n${issued.installCommand}`);
    }),
  );
}
