import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { compareVersions } from "@keelson/protocol";
import { CliError } from "../errors.ts";
import { connectedHosts, waitHostsBack } from "./agents-back.ts";
import { type Say, startAndWait } from "./install.ts";
import { currentVersion, type Layout, releaseDir, switchCurrent } from "./layout.ts";
import { readReleaseManifest, verifyRelease } from "./manifest.ts";
import { namePeers, otherLiveReplicas, type PeerReplica } from "./replica-set.ts";
import { type Inventory, inventory, readiness, runServerCommand, serverApi, serverDialect } from "./server.ts";
import { failureOf, type ServiceManager } from "./service.ts";
import { findServiceUser, giveDataDir } from "./service-user.ts";
import type { UpgradeConfig } from "./upgrade-config.ts";

/**
 * The control plane's upgrade and rollback (spec §4.9): stop, back up, switch, start (the new
 * release migrates the database as it starts), wait for readiness and the agents, keep watching
 * through a trial window; any failure after the stop puts the old release and the backed-up
 * database back by itself and says what failed.
 *
 * Why the backup is taken after the stop, not before: a write the API accepted between a backup
 * and the stop would be lost by a rollback; with the server stopped the backup is everything.
 * The cost is the backup's time in the API's downtime (`pnpm bench upgrade` measures it).
 */

export interface Step {
  name: string;
  seconds: number;
}

export interface UpgradeResult {
  from: string;
  to: string;
  backupDir: string;
  steps: Step[];
  /** From the stop to the first ready answer of the new release. */
  unavailableSeconds: number;
}

function stamp(): string {
  return new Date()
    .toISOString()
    .replaceAll(":", "")
    .replace(/\.\d+Z$/, "Z");
}

/** What an upgrade would do, and whether its preconditions hold; `problems` empty means it may go. */
export interface UpgradePlan {
  from: string | undefined;
  to: string;
  backupDir: string;
  steps: string[];
  problems: string[];
  /** The other live replicas on a shared PostgreSQL database (replica-set.ts): they keep serving. */
  peers: PeerReplica[];
}

/**
 * What the new release's migrations mean here. On a shared database a peer already running the
 * new release has applied them (the migrator skips what is applied), so this replica runs none.
 */
function migrationStep(added: number, dialect: "sqlite" | "postgres", to: string, peers: PeerReplica[]): string {
  const store = dialect === "postgres" ? "PostgreSQL" : "SQLite";
  const upgraded = peers.find((p) => p.version === to);
  if (added > 0 && upgraded)
    return `migrations to run at start: none (${upgraded.id} runs ${to} and applied its ${added}; ${store})`;
  return `migrations to run at start: ${added} (${store})`;
}

export async function planUpgrade(
  layout: Layout,
  config: UpgradeConfig,
  service: ServiceManager,
): Promise<UpgradePlan> {
  const from = currentVersion(layout);
  const to = config.version;
  const backupDir = config.backupDir ?? join(layout.backups, `upgrade-${from ?? "none"}-to-${to}-${stamp()}`);
  const problems: string[] = [];
  const steps: string[] = [];
  let peers: PeerReplica[] = [];
  let runsBeside: string | undefined;
  let migrations: { added: number; dialect: "sqlite" | "postgres" } | undefined;
  if (!from) problems.push(`nothing is installed under ${layout.root}: run keelson install control-plane first`);
  const target = releaseDir(layout, to);
  if (!existsSync(join(target, "manifest.json"))) {
    problems.push(`release ${to} is not downloaded: run keelson download <secret> ${to}`);
  } else {
    try {
      verifyRelease(target);
    } catch (err) {
      problems.push((err as Error).message);
    }
    const manifest = readReleaseManifest(target);
    runsBeside = manifest.upgradesFrom.minimum;
    if (from && compareVersions(from, manifest.upgradesFrom.minimum) < 0)
      problems.push(`release ${to} upgrades from ${manifest.upgradesFrom.minimum} or newer; ${from} is installed`);
    if (from && existsSync(join(releaseDir(layout, from), "manifest.json"))) {
      const old = readReleaseManifest(releaseDir(layout, from));
      const dialect = serverDialect(layout);
      migrations = { added: manifest.schemaVersion[dialect] - old.schemaVersion[dialect], dialect };
      if (manifest.protocolVersion !== old.protocolVersion)
        problems.push(
          `release ${to} speaks agent protocol ${manifest.protocolVersion}, the agents ${old.protocolVersion}: upgrade the hosts' agents first`,
        );
    }
  }
  if (from && from !== to && compareVersions(to, from) < 0)
    problems.push(`${to} is older than the installed ${from}: use keelson rollback --dir BACKUP to go back`);
  const health = service.health();
  const api = serverApi(layout);
  try {
    const ready = await readiness(api);
    if (from !== to && (!health.running || !ready.ready))
      problems.push(
        `keelson-server ${from ?? ""} is not running and ready (${ready.status}): start it (keelson advanced-ddu scale-du up) or roll back first`,
      );
    if (ready.ready) {
      steps.unshift(
        `hosts with their agent connected now: ${(await connectedHosts(api)).length}; the upgrade waits for each of them again`,
      );
      if (serverDialect(layout) === "postgres") peers = await otherLiveReplicas(api);
    }
  } finally {
    await api.close();
  }
  if (migrations) steps.push(migrationStep(migrations.added, migrations.dialect, to, peers));
  if (peers.length > 0)
    steps.unshift(
      `other live replicas on this database: ${namePeers(peers)}; they keep serving, and this replica's agents move to them while it restarts`,
    );
  for (const p of peers)
    if (runsBeside && compareVersions(p.version, runsBeside) < 0)
      problems.push(
        `replica ${p.id} runs ${p.version}, and release ${to} runs beside ${runsBeside} or newer only: upgrade ${p.id} first`,
      );
  steps.push(
    `stop keelson-server ${from} (${service.kind})`,
    `back up the database and the data dir's secrets into ${backupDir} (keelson-server ${from} backup)`,
    `switch ${layout.current} to releases/${to}`,
    `start keelson-server ${to} (it migrates the database as it starts)`,
    `wait up to ${config.readyTimeoutSeconds} s for /readyz, then up to ${config.agentsTimeoutSeconds} s for the agents`,
    `trial window: ${config.trialWindowSeconds} s ready without a restart`,
    peers.length > 0
      ? `on any failure: stop, switch back to ${from}, start ${from} on the database as ${to}'s migrations left it (the shared database is never restored while other replicas run on it)`
      : `on any failure: stop, switch back to ${from}, restore ${backupDir}, start ${from}`,
  );
  return { from, to, backupDir, steps, problems, peers };
}

export function sayPlan(plan: UpgradePlan, say: Say): void {
  say.note(`upgrade of the control plane from ${plan.from ?? "(nothing)"} to ${plan.to}:`);
  for (const [i, s] of plan.steps.entries()) say.note(`  ${i + 1}. ${s}`);
  for (const p of plan.problems) say.note(`  refused: ${p}`);
}

async function timed<T>(steps: Step[], name: string, say: Say, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    const seconds = Math.round(performance.now() - t0) / 1000;
    steps.push({ name, seconds });
    say.note(`  ${name}: ${seconds} s`);
  }
}

/** Waits until every host of `hostIds` has its agent connected again (agents-back.ts). */
async function waitAgents(layout: Layout, hostIds: string[], timeoutSeconds: number): Promise<string | undefined> {
  const api = serverApi(layout);
  try {
    return await waitHostsBack(api, hostIds, timeoutSeconds);
  } finally {
    await api.close();
  }
}

/** Ready for the whole window and not started again; the reason it was not, else undefined. */
async function trial(layout: Layout, service: ServiceManager, seconds: number): Promise<string | undefined> {
  const api = serverApi(layout);
  const starts = service.health().starts;
  let misses = 0;
  try {
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
      const h = service.health();
      if (h.starts !== starts || !h.running)
        return `keelson-server exited (${h.lastExit}) within the trial window: ${failureOf(service.logTail(200))}`;
      const r = await readiness(api);
      misses = r.ready ? 0 : misses + 1;
      if (misses >= 3) return `not ready within the trial window: ${r.status}`;
      await new Promise((res) => setTimeout(res, 500));
    }
    return undefined;
  } finally {
    await api.close();
  }
}

export async function upgradeControlPlane(
  layout: Layout,
  config: UpgradeConfig,
  service: ServiceManager,
  path: string,
  say: Say,
): Promise<UpgradeResult | undefined> {
  const plan = await planUpgrade(layout, config, service);
  if (plan.from === plan.to) {
    say.note(`keelson ${plan.to} is already installed and current: nothing to do`);
    return undefined;
  }
  sayPlan(plan, say);
  if (plan.problems.length > 0) throw new CliError(`upgrade refused: ${plan.problems.join("; ")}`);
  const from = plan.from as string;
  const { to, backupDir } = plan;
  const steps: Step[] = [];
  const before = serverApi(layout);
  let hostsBefore: string[];
  try {
    hostsBefore = (await connectedHosts(before)).map((h) => h.id);
  } finally {
    await before.close();
  }
  await timed(steps, "stop", say, () => service.stop());
  const stoppedAt = performance.now();
  await timed(steps, "backup", say, async () => {
    const r = await runServerCommand(layout, from, ["backup", backupDir], path);
    if (r.code !== 0) {
      await service.start();
      throw new CliError(
        `upgrade stopped before any change: the backup failed (${r.stderr.trim()}); ${from} started again`,
      );
    }
  });
  say.note(`backup: ${backupDir}`);
  let unavailableSeconds = 0;
  const failure = await (async (): Promise<string | undefined> => {
    await timed(steps, "switch", say, async () => switchCurrent(layout, to));
    const started = await timed(steps, "start and migrate", say, () =>
      startAndWait(layout, service, config.readyTimeoutSeconds * 1000),
    );
    unavailableSeconds = Math.round(performance.now() - stoppedAt) / 1000;
    if (!started.ready)
      return `keelson-server ${to} did not start: ${failureOf(service.logTail(200))} (${started.status})`;
    const agents = await timed(steps, "agents back", say, () =>
      waitAgents(layout, hostsBefore, config.agentsTimeoutSeconds),
    );
    if (agents) return agents;
    return timed(steps, "trial window", say, () => trial(layout, service, config.trialWindowSeconds));
  })();
  if (failure) {
    say.note(`upgrade to ${to} failed: ${failure}\nrolling back to ${from} by itself`);
    if (plan.peers.length > 0) {
      await restoreRelease(layout, service, from, undefined, path, say, steps);
      throw new CliError(
        `upgrade to ${to} failed and this replica was switched back to ${from}; the shared database was not restored ` +
          `(replicas ${plan.peers.map((p) => p.id).join(", ")} run on it; a database rollback stops every replica first: ` +
          `keelson rollback --dir ${backupDir}): ${failure}`,
      );
    }
    await restoreRelease(layout, service, from, backupDir, path, say, steps);
    throw new CliError(
      `upgrade to ${to} failed and was rolled back to ${from} (database restored from ${backupDir}): ${failure}`,
    );
  }
  say.note(
    `upgraded keelson-server from ${from} to ${to}; ${plan.peers.length > 0 ? "this replica's" : "the"} API was unavailable for ${unavailableSeconds} s`,
  );
  say.print(backupDir);
  return { from, to, backupDir, steps, unavailableSeconds };
}

/**
 * Stop (tolerant), switch to `version`, restore the backup with that release's keelson-server
 * (no `backupDir`: the database stays as it is, replica-set.ts), start, wait ready.
 */
async function restoreRelease(
  layout: Layout,
  service: ServiceManager,
  version: string,
  backupDir: string | undefined,
  path: string,
  say: Say,
  steps: Step[],
): Promise<void> {
  await timed(steps, "rollback: stop", say, () => service.stop());
  await timed(steps, "rollback: switch", say, async () => switchCurrent(layout, version));
  if (backupDir)
    await timed(steps, "rollback: restore", say, async () => {
      const r = await runServerCommand(layout, version, ["restore", backupDir], path);
      if (r.code !== 0)
        throw new CliError(`rollback: keelson-server ${version} restore ${backupDir} failed: ${r.stderr.trim()}`);
      // Restored as root: the service user must own the data dir's files again.
      const user = findServiceUser(layout.root);
      if (service.kind === "systemd" && user) giveDataDir(layout, user);
    });
  const ready = await timed(steps, "rollback: start", say, () => startAndWait(layout, service, 120_000));
  if (!ready.ready)
    throw new CliError(
      `rollback: keelson-server ${version} did not become ready: ${failureOf(service.logTail(200))} (${ready.status})`,
    );
}

export interface RollbackReport {
  version: string;
  lostClusters: Inventory["clusters"];
  lostHosts: Inventory["hosts"];
  steps: Step[];
}

/** `keelson rollback --dir BACKUP`: the backup's release and database back, and what was made since. */
export async function rollbackControlPlane(
  layout: Layout,
  backupDir: string,
  service: ServiceManager,
  path: string,
  agentsTimeoutSeconds: number,
  say: Say,
): Promise<RollbackReport> {
  let manifest: { serverVersion: string; createdAt: string };
  try {
    manifest = JSON.parse(readFileSync(join(backupDir, "manifest.json"), "utf8"));
  } catch (err) {
    throw new CliError(`--dir ${backupDir}: not a keelson-server backup (${(err as Error).message})`);
  }
  const version = manifest.serverVersion;
  if (!existsSync(join(releaseDir(layout, version), "manifest.json")))
    throw new CliError(
      `the backup was taken by keelson ${version}, which is not in ${layout.releases}: download it first`,
    );
  const api = serverApi(layout);
  let before: Inventory | undefined;
  let peers: PeerReplica[] = [];
  try {
    if ((await readiness(api)).ready) {
      before = await inventory(api);
      if (serverDialect(layout) === "postgres") peers = await otherLiveReplicas(api);
    }
  } finally {
    await api.close();
  }
  // Refused before any change: the restore would undo what they write (and refuses while they are connected).
  if (peers.length > 0)
    throw new CliError(
      `rollback refused: other replicas run on this database: ${namePeers(peers)}. A rollback restores the shared ` +
        `database: stop every other replica first (keelson stop on each), roll back here, then on each of them ` +
        `keelson install ${version} and keelson advanced-ddu scale-du up`,
    );
  say.note(
    `rollback to keelson ${version} with the backup of ${manifest.createdAt} (${backupDir}):\n` +
      `  1. stop keelson-server ${currentVersion(layout) ?? ""} (${service.kind}; tolerated if it is already down)\n` +
      `  2. switch ${layout.current} to releases/${version}\n  3. restore the database and secrets (keelson-server ${version} restore)\n` +
      `  4. start keelson-server ${version}, wait for it and for the agents\n` +
      `  5. list the clusters and hosts made after the backup${before ? "" : " (the server does not answer now: they cannot be listed)"}`,
  );
  const steps: Step[] = [];
  await restoreRelease(layout, service, version, backupDir, path, say, steps);
  const after = serverApi(layout);
  let now: Inventory;
  try {
    now = await inventory(after);
    const known = new Set(now.hosts.map((h) => h.id));
    const waitFor = before ? before.hosts.filter((h) => h.responding && known.has(h.id)).map((h) => h.id) : [];
    const missing = await timed(steps, "agents back", say, () => waitAgents(layout, waitFor, agentsTimeoutSeconds));
    if (missing) say.note(`  warning: ${missing}`);
  } finally {
    await after.close();
  }
  const keptClusters = new Set(now.clusters.map((c) => c.uuid));
  const keptHosts = new Set(now.hosts.map((h) => h.id));
  const lostClusters = before ? before.clusters.filter((c) => !keptClusters.has(c.uuid)) : [];
  const lostHosts = before ? before.hosts.filter((h) => !keptHosts.has(h.id)) : [];
  say.note(`rolled back to keelson ${version}.`);
  if (lostClusters.length > 0) {
    say.print("Clusters created after the backup; the rolled-back control plane does not know them:");
    for (const c of lostClusters) say.print(`  cluster ${c.name} (${c.uuid}, project ${c.project})`);
    say.print(
      "  What to do: destroy each of them (their nodes still run it: stop its services on each node), clean\n" +
        "  their nodes (keelson-agent's state dir), and reconnect them with a new join token before a new bootstrap.",
    );
  }
  if (lostHosts.length > 0) {
    say.print("Hosts that joined after the backup; their agents' credentials are unknown now:");
    for (const h of lostHosts) say.print(`  host ${h.hostname} (${h.id})`);
    say.print("  What to do: clean each host's agent state dir and join it again with a new join token.");
  }
  if (lostClusters.length === 0 && lostHosts.length === 0)
    say.print(
      before
        ? "Nothing was created after the backup."
        : "Made after the backup: unknown (the server did not answer before the rollback).",
    );
  return { version, lostClusters, lostHosts, steps };
}
