import { chmodSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import { CliError, usageError } from "../errors.ts";
import { startClusterOperation } from "../follow.ts";
import type { Wrap } from "../program.ts";
import { findCluster, findNodes, listNodes, pick } from "../resolve.ts";
import { examples, waitOption } from "./common.ts";

/**
 * What is done to a cluster: attach and detach hosts, staggered restarts and upgrades (each
 * followed to its end unless --no-wait), and its kubeconfig.
 */

const percent = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100)
    throw usageError(`--batch-percent ${value}: must be an integer from 1 to 100`);
  return n;
};

const hostList = (value: string, previous: string[] = []) => [...previous, ...value.split(",").filter(Boolean)];

export function clusterActionCommands(program: Command, wrap: Wrap): void {
  examples(
    waitOption(
      program
        .command("attach")
        .argument("<cluster>", "name or uuid")
        .description("Attach hosts to a cluster as masters and workers")
        .option("--master <host...>", "hosts to attach as masters (names or ids)", hostList)
        .option("--worker <host...>", "hosts to attach as workers (names or ids)", hostList),
    ),
    "keelson attach demo --master host-1 --worker host-2 host-3",
    "keelson attach demo --worker host-4 --no-wait",
  ).action(
    wrap(async (cli, ref, options) => {
      const o = options as { master?: string[]; worker?: string[]; wait: boolean };
      if (!o.master?.length && !o.worker?.length) throw usageError("attach needs --master HOST or --worker HOST");
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      const masters = await findNodes(s, o.master ?? []);
      const workers = await findNodes(s, o.worker ?? []);
      const body = [
        ...masters.map((n) => ({ uuid: n.uuid, isMaster: true })),
        ...workers.map((n) => ({ uuid: n.uuid, isMaster: false })),
      ];
      await startClusterOperation(cli, s, cluster, o.wait, "attach to", async () => {
        await s.api.json("POST", `/v4/${s.projectId}/clusters/${cluster.uuid}/attach`, { body });
      });
    }),
  );

  examples(
    waitOption(
      program
        .command("detach")
        .argument("<cluster>", "name or uuid")
        .argument("<host...>", "hosts to detach (names or ids)")
        .description("Detach hosts from a cluster (their role is looked up)"),
    ),
    "keelson detach demo host-3",
  ).action(
    wrap(async (cli, ref, hosts, options) => {
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      const members = (await listNodes(s)).filter((n) => n.clusterUuid === cluster.uuid);
      const body = (hosts as string[]).map((h) => {
        const node = pick(members, h, `host of cluster ${cluster.name}`);
        return { uuid: node.uuid, isMaster: node.isMaster === 1 };
      });
      await startClusterOperation(cli, s, cluster, (options as { wait: boolean }).wait, "detach from", async () => {
        await s.api.json("POST", `/v4/${s.projectId}/clusters/${cluster.uuid}/detach`, { body });
      });
    }),
  );

  examples(
    waitOption(
      program
        .command("restart")
        .argument("<cluster>", "name or uuid")
        .description("Staggered restart: masters one at a time, then workers in batches")
        .option("--masters", "only the masters")
        .option("--workers", "only the workers")
        .option("--batch-percent <n>", "percent of the workers restarted together (default 10)", percent),
    ),
    "keelson restart demo",
    "keelson restart demo --workers --batch-percent 25",
    "keelson restart demo --no-wait",
  ).action(
    wrap(async (cli, ref, options) => {
      const o = options as { masters?: boolean; workers?: boolean; batchPercent?: number; wait: boolean };
      if (o.masters && o.workers) throw usageError("give --masters or --workers, not both (neither: every node)");
      const action = o.masters ? "restartMasters" : o.workers ? "restartWorkers" : "restart";
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      await startClusterOperation(cli, s, cluster, o.wait, "restart of", async () => {
        // Restarts exist in the v3 API only (spec §2.8).
        await s.api.json("POST", `/v3/${s.projectId}/clusters/${cluster.uuid}/${action}`, {
          query: { batchPercent: o.batchPercent },
        });
      });
    }),
  );

  examples(
    waitOption(
      program
        .command("upgrade")
        .argument("<cluster>", "name or uuid")
        .description("Upgrade a cluster to its patch or minor target, masters first, then workers in batches")
        .requiredOption("--type <type>", "patch or minor")
        .option("--batch-percent <n>", "percent of the workers upgraded together (default 10)", percent)
        .option("--nodes <host...>", "workers upgraded together first (names or ids)", hostList)
        .option("--force", "upgrade even when the cluster is unhealthy"),
    ),
    "keelson upgrade demo --type patch",
    "keelson upgrade demo --type minor --batch-percent 50 --nodes worker-1 worker-2",
  ).action(
    wrap(async (cli, ref, options) => {
      const o = options as { type: string; batchPercent?: number; nodes?: string[]; force?: boolean; wait: boolean };
      if (o.type !== "patch" && o.type !== "minor") throw usageError(`--type ${o.type}: must be patch or minor`);
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      const chosen = await findNodes(s, o.nodes ?? []);
      const body = {
        ...(o.batchPercent !== undefined ? { batchUpgradePercent: o.batchPercent } : {}),
        ...(chosen.length > 0 ? { batchUpgradeNodes: chosen.map((n) => n.uuid) } : {}),
      };
      await startClusterOperation(cli, s, cluster, o.wait, "upgrade of", async () => {
        await s.api.json("POST", `/v4/${s.projectId}/clusters/${cluster.uuid}/upgrade`, {
          query: { type: o.type, ...(o.force ? { force: true } : {}) },
          body,
        });
      });
    }),
  );

  examples(
    program
      .command("kubeconfig")
      .argument("<cluster>", "name or uuid")
      .description("Fetch a kubeconfig with a fresh credential for you (a token, or a client certificate)")
      .option("--cert", "a client certificate instead of a bearer token")
      .option("-o, --output <file>", "write it to this file (mode 0600) instead of stdout"),
    "keelson kubeconfig demo > demo.yaml",
    "keelson kubeconfig demo --cert -o ~/.kube/demo.yaml",
  ).action(
    wrap(async (cli, ref, options) => {
      const o = options as { cert?: boolean; output?: string };
      const s = await cli.session();
      const cluster = await findCluster(s, ref as string);
      const yaml = await s.api.text(`/v4/${s.projectId}/kubeconfig/${cluster.uuid}`, {
        ...(o.cert ? { force_cert_auth: true } : {}),
      });
      if (!o.output) return cli.out.print(yaml.trimEnd());
      try {
        writeFileSync(o.output, yaml, { mode: 0o600 });
        chmodSync(o.output, 0o600);
      } catch (error) {
        throw new CliError(`cannot write ${o.output}: ${(error as Error).message}`);
      }
      cli.out.note(`kubeconfig of cluster ${cluster.name} written to ${o.output}`);
    }),
  );
}
