import { execFileSync } from "node:child_process";
import type { Command } from "commander";
import { setControlPlanePins } from "../control-plane-pins.ts";
import { ApiRefusal, CliError, usageError } from "../errors.ts";
import { startAndFollow } from "../follow.ts";
import { type HostsConfig, parseHostsConfig, readAgentPackage, selectHosts } from "../hosts-config.ts";
import { archiveFiles, stageArchives, storeArchives } from "../image-archives.ts";
import { render } from "../output.ts";
import type { Wrap } from "../program.ts";
import type { Cli, Session } from "../session.ts";
import { examples, ownConfigOption, readSpec, waitOption } from "./common.ts";
import { HOST_STATUS_COLUMNS, type HostStatus, hostStatuses } from "./host-status.ts";

/**
 * `keelson configure-hosts` and `upgrade-hosts` (spec §4.9, step 4): the hosts listed in the
 * config file (or the `--hosts` subset of them) get the agent package `hostAgentRepo` names,
 * through the control plane's host-agent rollout (`POST /v4/{project}/hostAgentUpgrades`:
 * batches, each gated on its hosts coming back `running` at the new version).
 */

const CONFIG_HELP =
  "the hosts' config file (YAML: hostAgentRepo, dockerRepo, batchSize, hosts, controlPlaneHosts), required";

async function loadConfig(cli: Cli, file: string | undefined): Promise<HostsConfig> {
  if (!file) throw usageError("--config <file> is required: the hosts' config file");
  return parseHostsConfig(file, await readSpec(cli, file));
}

/** The version the package declares (its manifest.json), read without unpacking it to disk. */
export function packageVersion(config: Pick<HostsConfig, "file" | "hostAgentRepo">): string {
  let manifest: { name?: unknown; version?: unknown };
  try {
    manifest = JSON.parse(
      execFileSync("tar", ["-xzOf", config.hostAgentRepo, "manifest.json"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
  } catch {
    throw usageError(
      `${config.file}: hostAgentRepo ${config.hostAgentRepo} is not an agent package (no manifest.json)`,
    );
  }
  if (manifest.name !== "keelson-agent" || typeof manifest.version !== "string") {
    throw usageError(`${config.file}: hostAgentRepo ${config.hostAgentRepo} is not a keelson-agent package`);
  }
  return manifest.version;
}

/** The listed hosts as the control plane knows them; one it does not know fails the command. */
async function resolveHosts(s: Session, wanted: HostsConfig["hosts"]): Promise<HostStatus[]> {
  const all = await hostStatuses(s);
  const missing = wanted.filter((w) => !all.some((h) => h.name === w.name)).map((w) => w.name);
  if (missing.length > 0) throw new CliError(`no host named ${missing.join(", ")} in project ${s.projectName}`);
  return wanted.map((w) => all.find((h) => h.name === w.name) as HostStatus);
}

export function hostUpgradeCommands(program: Command, wrap: Wrap): void {
  examples(
    ownConfigOption(program.command("configure-hosts"), CONFIG_HELP)
      .description(
        "Stage the config's agent package on the control plane for the listed hosts, check their addresses, " +
          "stage its image archives (dockerRepo) on them, and set where their agents reach the control plane " +
          "(controlPlaneHosts) (before upgrade-hosts; needs the admin token)",
      )
      .option("--hosts <names>", "only these of the listed hosts (comma-separated)"),
    "keelson configure-hosts --config hosts.yaml",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { config?: string; hosts?: string };
      const config = await loadConfig(cli, o.config);
      const wanted = selectHosts(config, o.hosts);
      const version = packageVersion(config);
      const pkg = readAgentPackage(config);
      const archives = config.dockerRepo ? archiveFiles(config.file, config.dockerRepo) : [];
      const s = await cli.session();
      cli.out.note(
        `configure-hosts: agent package ${version}${archives.length > 0 ? ` and ${archives.length} image archive(s)` : ""} ` +
          `for ${wanted.map((h) => h.name).join(", ")}`,
      );
      const hosts = await resolveHosts(s, wanted);
      const moved = wanted.filter((w, i) => w.ip !== undefined && w.ip !== hosts[i]?.ip);
      if (moved.length > 0) {
        const lines = moved.map(
          (w) => `${w.name}: ${w.ip} in the config, ${hosts.find((h) => h.name === w.name)?.ip} reported`,
        );
        throw new CliError(`addresses differ from what the hosts report (fix the config):\n  ${lines.join("\n  ")}`);
      }
      const stored = await stageAgentPackage(s, pkg);
      cli.out.print(`agent package ${stored.version} stored on the control plane (sha256 ${stored.sha256})`);
      if (archives.length > 0) await stageArchives(cli, s, hosts, await storeArchives(cli, s, archives));
      const unpinned = config.controlPlaneHosts
        ? await setControlPlanePins(cli, s, hosts, config.controlPlaneHosts)
        : [];
      if (unpinned.length > 0) {
        throw new CliError(
          `control-plane addresses not set on ${unpinned.join(", ")} (see above); their pins are as they were`,
        );
      }
      const behind = hosts.filter((h) => h.hostAgentVersion !== version).map((h) => h.name);
      cli.out.print(
        behind.length > 0
          ? `ready: keelson upgrade-hosts --config ${o.config} --hosts ${behind.join(",")}`
          : `every listed host runs agent ${version} already`,
      );
    }),
  );

  examples(
    waitOption(
      ownConfigOption(program.command("upgrade-hosts"), CONFIG_HELP)
        .description(
          "Upgrade the agents of the listed hosts to the config's package, in health-gated batches with progress " +
            "(run configure-hosts first)",
        )
        .option("--hosts <names>", "only these of the listed hosts (comma-separated)")
        .option("--batch-size <n>", "hosts upgraded at once (default: the config's batchSize)", (v) =>
          Number.parseInt(v, 10),
        ),
    ),
    "keelson upgrade-hosts --config hosts.yaml --hosts worker-1,worker-2",
    "keelson upgrade-hosts --config hosts.yaml --batch-size 3 --no-wait",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { config?: string; hosts?: string; batchSize?: number; wait: boolean };
      const config = await loadConfig(cli, o.config);
      const wanted = selectHosts(config, o.hosts);
      const batchSize = o.batchSize ?? config.batchSize;
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 1000) {
        throw usageError("--batch-size must be an integer from 1 to 1000");
      }
      const version = packageVersion(config);
      const s = await cli.session();
      const hosts = await resolveHosts(s, wanted);
      const current = hosts.filter((h) => h.hostAgentVersion === version);
      const todo = hosts.filter((h) => h.hostAgentVersion !== version);
      for (const h of current) cli.out.note(`${h.name}: runs agent ${version} already; left alone`);
      if (todo.length === 0) {
        cli.out.print(`every listed host runs agent ${version} already`);
        return;
      }
      cli.out.note(
        `upgrade-hosts: agents of ${todo.map((h) => h.name).join(", ")} to ${version}, ${batchSize} at a time`,
      );
      const names = new Map(hosts.map((h) => [h.uuid, h.name]));
      const stageHint = `run keelson configure-hosts --config ${o.config} first`;
      if (!o.wait) {
        const id = await requestAgentUpgrade(cli, s, { version, hosts: todo, batchSize, stageHint });
        cli.out.print(id);
        cli.out.note(`follow it with: keelson operations watch ${id}`);
        return;
      }
      await upgradeAgents(cli, s, { version, hosts: todo, batchSize, stageHint });
      const after = (await hostStatuses(s)).filter((h) => names.has(h.uuid));
      render(cli.out, "table", after, HOST_STATUS_COLUMNS);
    }),
  );
}

/** Stores the agent package on the control plane (`POST /v1/agentPackages`, the admin's), where agents download it. */
export function stageAgentPackage(s: Session, pkg: { bytes: Buffer }): Promise<{ version: string; sha256: string }> {
  return s.api.json("POST", "/v1/agentPackages", { body: pkg.bytes });
}

export interface AgentUpgrade {
  version: string;
  hosts: readonly HostStatus[];
  batchSize: number;
  /** What to run first when the control plane does not hold the package yet. */
  stageHint: string;
}

/**
 * `POST /v4/{project}/hostAgentUpgrades` for these hosts; prints the batches the control plane
 * planned (masters of one cluster never share one) and returns the operation's id.
 */
async function requestAgentUpgrade(cli: Cli, s: Session, u: AgentUpgrade): Promise<string> {
  const names = new Map(u.hosts.map((h) => [h.uuid, h.name]));
  let answer: { operationId: string; batches: string[][] };
  try {
    answer = await s.api.json("POST", `/v4/${s.projectId}/hostAgentUpgrades`, {
      body: { version: u.version, hosts: u.hosts.map((h) => h.uuid), batchSize: u.batchSize },
    });
  } catch (error) {
    if (error instanceof ApiRefusal && error.field === "version") {
      throw new CliError(`${error.message}; ${u.stageHint}`);
    }
    throw error;
  }
  answer.batches.forEach((batch, i) => {
    cli.out.note(`  batch ${i + 1}: ${batch.map((id) => names.get(id) ?? id).join(", ")}`);
  });
  return answer.operationId;
}

/** The host-agent rollout of upgrade-hosts and advanced-ddu upgrade-mgmt, followed to its end. */
export function upgradeAgents(cli: Cli, s: Session, u: AgentUpgrade): Promise<void> {
  return startAndFollow(cli, s, () => requestAgentUpgrade(cli, s, u));
}
