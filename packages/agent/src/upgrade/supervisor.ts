import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { SETTINGS_EXIT_CODE, SettingsError } from "@keelson/settings";
import pino, { type Logger } from "pino";
import { type LauncherSettings, readLauncherSettings } from "../settings.ts";
import { StateDir } from "../state-dir.ts";
import { isReadyMessage, RESTART_EXIT_CODE } from "./ipc.ts";
import { writeUpgradeOutcome } from "./status.ts";
import { type TrialRecord, VersionStore } from "./versions.ts";

/**
 * The launcher behind `keelson-agent` (docs/agent-package.md, "Restart and rollback"). It runs
 * the agent as a child process and owns what the agent cannot do for itself:
 *
 * - start the version `versions/current` points to, or the workspace sources without one;
 * - start it again when it exits with RESTART_EXIT_CODE (it switched to a new version);
 * - judge a trial: after a switch the new version must report ready (local API up, control
 *   plane reached) within the trial time, or it is stopped, `current` goes back to the
 *   previous version, the failure is recorded for the old version to report, and that starts;
 * - pass SIGTERM/SIGINT/SIGHUP on and exit with the agent's code, so systemd sees the agent's
 *   verdict (KillMode=mixed signals only this process first).
 *
 * The same scheme runs under systemd and in tests: no dependency on Restart= for upgrades.
 */
export interface SupervisorOptions {
  argv: string[];
  env: NodeJS.ProcessEnv;
  log?: Logger;
  /** How to run the workspace sources; default node + tsx + src/main.ts. */
  workspaceCommand?: { command: string; args: string[] };
  /** Default from KEELSON_AGENT_UPGRADE_TRIAL_MS, else 60 s. */
  trialMs?: number;
  /** Grace between passing a stop signal on and SIGKILL. */
  stopTimeoutMs?: number;
}

type ChildOutcome = { kind: "exited"; code: number; ready: boolean } | { kind: "trial-timeout" };

interface Target {
  /** "workspace" when no version is installed. */
  version: string;
  command: string;
  args: string[];
}

const STOP_SIGNALS: NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];
/** More restarts than this within a minute means something loops: give up and let systemd decide. */
const MAX_RESTARTS_PER_MINUTE = 10;

export async function runSupervisor(options: SupervisorOptions): Promise<number> {
  let settings: LauncherSettings;
  try {
    settings = readLauncherSettings(options.env, options.argv);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    (options.log ?? pino({ name: "keelson-agent-launcher" })).fatal(err.message);
    return SETTINGS_EXIT_CODE;
  }
  const log = options.log ?? pino({ name: "keelson-agent-launcher", level: settings.logLevel });
  const stateDir = new StateDir(settings.stateDir).ensure();
  const versions = new VersionStore(stateDir.path("versions")).ensure();
  const trialMs = options.trialMs ?? settings.upgradeTrialMs;
  const stopTimeoutMs = options.stopTimeoutMs ?? 25_000;

  let child: ChildProcess | undefined;
  let stopping: NodeJS.Signals | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = signal;
    log.info({ signal }, "stopping the agent");
    if (child && child.exitCode === null) {
      child.kill(signal);
      killTimer = setTimeout(() => child?.kill("SIGKILL"), stopTimeoutMs);
      killTimer.unref();
    }
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);

  const restarts: number[] = [];
  try {
    while (!stopping) {
      let trial = versions.readTrial();
      const target = resolveTarget(versions, trial, options, log);
      if (trial && trial.version !== target.version) {
        // current no longer names the trial's version (someone switched by hand): no trial.
        versions.clearTrial();
        trial = undefined;
      }
      log.info({ version: target.version, trial: Boolean(trial) }, "starting the agent");
      const started = spawnChild(target, options);
      child = started.child;
      const outcome = await started.outcome(
        trial ? trialMs : undefined,
        () => {
          if (!trial) return;
          versions.clearTrial();
          writeUpgradeOutcome(stateDir, {
            state: "succeeded",
            version: trial.version,
            from: trial.previous ?? "workspace",
            at: new Date().toISOString(),
          });
          log.info({ version: trial.version }, "the new version came up; keeping it");
          trial = undefined;
        },
        stopTimeoutMs,
      );
      child = undefined;
      if (stopping) return outcome.kind === "exited" ? outcome.code : 0;

      if (trial) {
        const why =
          outcome.kind === "trial-timeout"
            ? `did not come up within ${Math.round(trialMs / 1000)} s`
            : `exited with code ${outcome.code} before it came up`;
        rollBack(versions, stateDir, trial, `version ${trial.version} ${why}`, log);
        continue;
      }
      if (outcome.kind === "exited" && outcome.code !== RESTART_EXIT_CODE) return outcome.code;

      const now = Date.now();
      restarts.push(now);
      while (restarts.length > 0 && (restarts[0] ?? now) < now - 60_000) restarts.shift();
      if (restarts.length > MAX_RESTARTS_PER_MINUTE) {
        log.error("the agent asked to restart too often; giving up");
        return 1;
      }
    }
    return 0;
  } finally {
    if (killTimer) clearTimeout(killTimer);
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
}

function rollBack(versions: VersionStore, stateDir: StateDir, trial: TrialRecord, error: string, log: Logger): void {
  versions.rollback(trial);
  writeUpgradeOutcome(stateDir, {
    state: "failed",
    version: trial.version,
    error: `upgrade to ${trial.version} rolled back: ${error}`,
    at: new Date().toISOString(),
  });
  log.error({ version: trial.version, previous: trial.previous ?? "workspace" }, `rolled back: ${error}`);
}

/** What to run: the installed current version, or the workspace sources. */
function resolveTarget(
  versions: VersionStore,
  trial: TrialRecord | undefined,
  options: SupervisorOptions,
  log: Logger,
): Target {
  const linked = versions.linkTarget("current");
  if (linked) {
    const installed = versions.installed("current");
    if (installed) {
      return { version: installed.version, command: process.execPath, args: [installed.entry, ...options.argv] };
    }
    // A current that cannot run (deleted by hand, or a half-copied tree): never start it.
    if (trial && trial.version === linked) {
      versions.rollback(trial);
      log.error({ version: linked }, "the new version is incomplete; rolled back");
    } else {
      const previous = versions.installed("previous");
      log.error({ version: linked, fallback: previous?.version ?? "workspace" }, "the current version is incomplete");
      versions.rollback({ version: linked, previous: previous?.version ?? null, switchedAt: "" });
    }
    return resolveTarget(versions, undefined, options, log);
  }
  const workspace = options.workspaceCommand ?? {
    command: process.execPath,
    args: ["--import", import.meta.resolve("tsx"), fileURLToPath(new URL("../main.ts", import.meta.url))],
  };
  return { version: "workspace", command: workspace.command, args: [...workspace.args, ...options.argv] };
}

function spawnChild(
  target: Target,
  options: SupervisorOptions,
): {
  child: ChildProcess;
  outcome: (trialMs: number | undefined, onReady: () => void, stopTimeoutMs: number) => Promise<ChildOutcome>;
} {
  const child = spawn(target.command, target.args, {
    env: options.env,
    stdio: ["inherit", "inherit", "inherit", "ipc"],
  });
  const outcome = (trialMs: number | undefined, onReady: () => void, stopTimeoutMs: number) =>
    new Promise<ChildOutcome>((done) => {
      let ready = false;
      let timedOut = false;
      let trialTimer: NodeJS.Timeout | undefined;
      if (trialMs !== undefined) {
        trialTimer = setTimeout(() => {
          timedOut = true;
          child.kill("SIGTERM");
          setTimeout(() => child.kill("SIGKILL"), stopTimeoutMs).unref();
        }, trialMs);
      }
      child.on("message", (message) => {
        if (!isReadyMessage(message) || ready) return;
        ready = true;
        if (trialTimer) clearTimeout(trialTimer);
        onReady();
      });
      child.once("error", () => {
        // spawn failed (node binary gone): reported like an exit through the 'exit' that follows,
        // or right here when none follows.
        if (child.exitCode === null && child.pid === undefined) done({ kind: "exited", code: 1, ready });
      });
      child.once("exit", (code, signal) => {
        if (trialTimer) clearTimeout(trialTimer);
        if (timedOut && !ready) return done({ kind: "trial-timeout" });
        done({ kind: "exited", code: code ?? 128 + signalNumber(signal), ready });
      });
    });
  return { child, outcome };
}

function signalNumber(signal: NodeJS.Signals | null): number {
  const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return (signal && numbers[signal]) || 1;
}
