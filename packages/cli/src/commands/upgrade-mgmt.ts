import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { CliError, usageError } from "../errors.ts";
import { startClusterOperation } from "../follow.ts";
import { readAgentPackage } from "../hosts-config.ts";
import { archiveFiles, missingImages, stageArchives, storeArchives } from "../image-archives.ts";
import { render } from "../output.ts";
import type { Wrap } from "../program.ts";
import { findCluster, listNodes } from "../resolve.ts";
import type { Session } from "../session.ts";
import { examples, ownConfigOption, readSpec } from "./common.ts";
import { HOST_STATUS_COLUMNS, type HostStatus, hostStatuses } from "./host-status.ts";
import { packageVersion, stageAgentPackage, upgradeAgents } from "./host-upgrades.ts";

/**
 * `keelson advanced-ddu upgrade-mgmt --config <cluster spec>` (spec §4.9, step 2): the
 * management cluster's node agents upgraded to the package the spec's `nodeletPkg` names, then
 * its nodes restarted staggered (masters one at a time, so the API stays up). Built on the
 * machinery of upgrade-hosts (the host-agent rollout, `POST /v4/{project}/hostAgentUpgrades`)
 * and of `keelson restart` (`POST /v3/{project}/clusters/{uuid}/restart`); done when every node
 * of the cluster runs the new agent, connected, and its node is back `ok` (every phase
 * running), and, with a `dockerRepo`, every image of its archives is in the node's runtime
 * (`ctr images ls`, asked of each agent after the restart).
 */

export interface MgmtSpec {
  file: string;
  /** The management cluster, by name or uuid. */
  cluster: string;
  /** The node agent package, absolute (the spec's path is relative to the file). */
  hostAgentRepo: string;
  /** The image bundle (an archive or a directory of them), absolute; optional. */
  dockerRepo?: string;
}

/**
 * The cluster spec file: `name`, `nodeletPkg` and `dockerRepo` are read; its other fields are the cluster's
 * (the same file `keelson clusters create -f` takes) and are not applied here.
 */
export function parseMgmtSpec(file: string, doc: Record<string, unknown>): MgmtSpec {
  if (typeof doc.name !== "string" || doc.name === "")
    throw usageError(`${file}: name must name the management cluster (its name or uuid)`);
  if (typeof doc.nodeletPkg !== "string" || doc.nodeletPkg === "")
    throw usageError(`${file}: nodeletPkg must name the node agent package file (keelson-agent-<version>.tar.gz)`);
  if (doc.dockerRepo !== undefined && (typeof doc.dockerRepo !== "string" || doc.dockerRepo === ""))
    throw usageError(`${file}: dockerRepo must name an image archive (.tar) or a directory of them`);
  return {
    file,
    cluster: doc.name,
    hostAgentRepo: resolve(dirname(file), doc.nodeletPkg),
    ...(typeof doc.dockerRepo === "string" ? { dockerRepo: resolve(dirname(file), doc.dockerRepo) } : {}),
  };
}

/** Why a node of the cluster is not done, or undefined when it is. */
function notDone(h: HostStatus, version: string): string | undefined {
  if (h.status === "offline") return `${h.name}: agent offline`;
  if (h.hostAgentVersion !== version) return `${h.name}: agent ${h.hostAgentVersion}, not ${version}`;
  if (h.nodeStatus !== "ok") return `${h.name}: node ${h.nodeStatus}${h.agentError ? ` (${h.agentError})` : ""}`;
  return undefined;
}

async function members(s: Session, clusterUuid: string): Promise<HostStatus[]> {
  const ids = new Set((await listNodes(s)).filter((n) => n.clusterUuid === clusterUuid).map((n) => n.uuid));
  return (await hostStatuses(s)).filter((h) => ids.has(h.uuid));
}

export function upgradeMgmtCommand(program: Command, wrap: Wrap): void {
  const ddu = program
    .command("advanced-ddu")
    .description("The management cluster's upgrade (the deployment unit's own commands run on its host)");
  examples(
    ownConfigOption(
      ddu.command("upgrade-mgmt"),
      "the management cluster's spec file (YAML: name, nodeletPkg, dockerRepo), required",
    ).description(
      "Upgrade the node agents of the management cluster to the spec's nodeletPkg, then restart its nodes " +
        "staggered (masters one at a time); done when every node runs the new agent, is back ok and its " +
        "runtime lists the images of the spec's dockerRepo " +
        "(needs the admin token)",
    ),
    "keelson advanced-ddu upgrade-mgmt --config mgmt-cluster.yaml",
  ).action(
    wrap(async (cli, options) => {
      const file = (options as { config?: string }).config;
      if (!file) throw usageError("--config <file> is required: the management cluster's spec file");
      const spec = parseMgmtSpec(file, await readSpec(cli, file));
      const version = packageVersion(spec);
      const pkg = readAgentPackage(spec);
      const archiveList = spec.dockerRepo ? archiveFiles(spec.file, spec.dockerRepo) : [];
      const s = await cli.session();
      const cluster = await findCluster(s, spec.cluster);
      const nodes = await members(s, cluster.uuid);
      if (nodes.length === 0) throw new CliError(`cluster ${cluster.name} has no nodes: nothing to upgrade`);
      const offline = nodes.filter((h) => h.status === "offline").map((h) => h.name);
      if (offline.length > 0)
        throw new CliError(`the agents of ${offline.join(", ")} are offline: bring them back first; nothing changed`);
      const todo = nodes.filter((h) => h.hostAgentVersion !== version);
      cli.out.note(
        `upgrade-mgmt: cluster ${cluster.name} (${nodes.map((h) => h.name).join(", ")}): ` +
          `${todo.length > 0 ? `agents of ${todo.map((h) => h.name).join(", ")} to ${version}, one at a time, then ` : `agents run ${version} already; `}` +
          "a staggered restart of its nodes",
      );
      const stored = await stageAgentPackage(s, pkg);
      cli.out.note(`agent package ${stored.version} stored on the control plane (sha256 ${stored.sha256})`);
      if (todo.length > 0) {
        await upgradeAgents(cli, s, {
          version,
          hosts: todo,
          batchSize: 1,
          stageHint: "the package was stored a moment ago; run upgrade-mgmt again",
        });
      }
      // After the agents' upgrade: an agent older than the images commands could not stage them.
      const archives = await storeArchives(cli, s, archiveList);
      await stageArchives(cli, s, nodes, archives);
      await startClusterOperation(cli, s, cluster, true, "restart of", async () => {
        // Restarts exist in the v3 API only (spec §2.8); masters one at a time, then the workers.
        await s.api.json("POST", `/v3/${s.projectId}/clusters/${cluster.uuid}/restart`);
      });
      const after = await members(s, cluster.uuid);
      render(cli.out, "table", after, HOST_STATUS_COLUMNS);
      const left = after.flatMap((h) => notDone(h, version) ?? []);
      if (left.length === 0) left.push(...(await missingImages(s, after, archives)));
      if (left.length > 0) throw new CliError(`upgrade-mgmt is not done:\n  ${left.join("\n  ")}`);
      cli.out.print(
        `cluster ${cluster.name}: every node runs agent ${version} and is ok` +
          (archives.length > 0 ? `; its runtimes list ${archives.flatMap((a) => a.images).join(", ")}` : ""),
      );
    }),
  );
}
