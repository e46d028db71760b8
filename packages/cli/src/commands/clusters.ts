import type { Command } from "commander";
import { usageError } from "../errors.ts";
import { startClusterOperation, startOperation } from "../follow.ts";
import { type Column, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import { type ClusterRecord, findCluster, listClusters } from "../resolve.ts";
import type { Cli } from "../session.ts";
import { collect, examples, formatOf, outputOption, readSpec, setPairs, waitOption } from "./common.ts";

/** `keelson clusters list|get|create|update|delete` on the v4 cluster API. */

const COLUMNS: Column<ClusterRecord>[] = [
  { header: "NAME", value: (c) => c.name },
  { header: "UUID", value: (c) => c.uuid },
  { header: "STATUS", value: (c) => c.status, status: true },
  { header: "TASK", value: (c) => c.taskStatus, status: true },
  { header: "VERSION", value: (c) => c.kubeRoleVersion },
  { header: "MASTERS", value: (c) => String(c.masterStatus ?? "") },
  { header: "WORKERS", value: (c) => String(c.workerStatus ?? "") },
];

function warn(cli: Cli, warnings: string[]): void {
  for (const w of warnings) cli.out.note(`warning: ${w}`);
}

export function clusterCommands(program: Command, wrap: Wrap): void {
  const clusters = program.command("clusters").alias("cluster").description("Create, read, change and delete clusters");

  examples(
    outputOption(clusters.command("list").alias("ls").description("List the project's clusters")),
    "keelson clusters list",
    "keelson clusters list -o json",
  ).action(
    wrap(async (cli, options) => {
      const s = await cli.session();
      render(cli.out, formatOf(options as { output: string }), await listClusters(s), COLUMNS);
    }),
  );

  examples(
    outputOption(clusters.command("get").argument("<cluster>", "name or uuid").description("Show one cluster")),
    "keelson clusters get demo",
    "keelson clusters get demo -o yaml",
  ).action(
    wrap(async (cli, ref, options) => {
      const s = await cli.session();
      const found = await findCluster(s, ref as string);
      const full = await s.api.get<ClusterRecord>(`/v4/${s.projectId}/clusters/${found.uuid}`);
      render(cli.out, formatOf(options as { output: string }), full, COLUMNS);
    }),
  );

  examples(
    waitOption(
      clusters
        .command("create")
        .description("Create a cluster from a spec file (the v4 create fields, YAML or JSON)")
        .requiredOption("-f, --file <spec>", "the spec file, - for stdin")
        .option("--set <key=value>", "set or override a field (repeatable)", collect, []),
    ),
    "keelson clusters create -f demo.yaml",
    "keelson clusters create -f - <<< '{name: demo, masterVipIpv4: 10.0.0.10, masterVipIface: eth0}'",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { file: string; set: string[]; wait: boolean };
      const body = setPairs(o.set, await readSpec(cli, o.file));
      const s = await cli.session();
      await startOperation(cli, s, {
        wait: o.wait,
        what: `create of cluster ${String(body.name ?? "")}`,
        start: async () => {
          const res = await s.api.write<{ uuid: string }>("POST", `/v4/${s.projectId}/clusters`, body);
          warn(cli, res.warnings);
          cli.out.note(`cluster ${String(body.name ?? "")} created: ${res.body.uuid}`);
          return res.body.uuid;
        },
      });
    }),
  );

  examples(
    waitOption(
      clusters
        .command("update")
        .argument("<cluster>", "name or uuid")
        .description("Change a cluster's updatable fields (the v4 update set)")
        .option("-f, --file <spec>", "fields to change, - for stdin")
        .option("--set <key=value>", "a field to change (repeatable)", collect, []),
    ),
    "keelson clusters update demo --set numWorkers=3",
    "keelson clusters update demo -f changes.yaml --no-wait",
  ).action(
    wrap(async (cli, ref, options) => {
      const o = options as { file?: string; set: string[]; wait: boolean };
      if (!o.file && o.set.length === 0) throw usageError("update needs -f FILE or --set key=value");
      const body = setPairs(o.set, o.file ? await readSpec(cli, o.file) : {});
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      await startClusterOperation(cli, s, cluster, o.wait, "update of", async () => {
        const res = await s.api.write("PUT", `/v4/${s.projectId}/clusters/${cluster.uuid}`, body);
        warn(cli, res.warnings);
      });
    }),
  );

  examples(
    waitOption(
      clusters.command("delete").alias("rm").argument("<cluster>", "name or uuid").description("Delete a cluster"),
    ),
    "keelson clusters delete demo",
  ).action(
    wrap(async (cli, ref, options) => {
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      await startClusterOperation(cli, s, cluster, (options as { wait: boolean }).wait, "delete of", async () => {
        await s.api.json("DELETE", `/v4/${s.projectId}/clusters/${cluster.uuid}`);
      });
    }),
  );
}
