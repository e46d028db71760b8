import { rm } from "node:fs/promises";
import type { UpgradeRequest } from "@keelson/protocol";
import type { Logger } from "pino";
import type { StateDir } from "../state-dir.ts";
import { downloadPackage, fetchPublishedSha256 } from "./download.ts";
import { verifyPackageDir } from "./manifest.ts";
import { readUpgradeOutcome, upgradeError, writeUpgradeOutcome } from "./status.ts";
import { unpackTarball } from "./unpack.ts";
import { VersionStore } from "./versions.ts";

export type AgentStatus = "running" | "updating";

export interface UpgraderOptions {
  stateDir: StateDir;
  /** The version this process runs. */
  currentVersion: string;
  /** Downloads with the control plane's trust (link/trust.ts). */
  fetch?: typeof fetch;
  log: Logger;
  /** Called whenever status or error change, so the link and the host record follow. */
  onChange: (state: { status: AgentStatus; error: string | undefined }) => void;
  /**
   * Called once the new version is current: stop this process so the launcher starts it. The
   * upgrader's job ends there; the launcher decides between keeping it and rolling back.
   */
  restart: (version: string) => Promise<void>;
}

export class UpgradeBusyError extends Error {
  override name = "UpgradeBusyError";
}

/**
 * Self-upgrade (spec §4.9): status `updating` at once, then download, checksum, unpack,
 * verify the manifest, install beside the current version, switch `current`, restart. Any
 * failure before the switch leaves the old version running with the error recorded; after the
 * switch the launcher (upgrade/supervisor.ts) owns the outcome.
 */
export class Upgrader {
  private state: AgentStatus = "running";
  private lastError: string | undefined;
  private running: Promise<boolean> | undefined;
  private restarting = false;
  private abortController: AbortController | undefined;
  readonly versions: VersionStore;

  constructor(private readonly options: UpgraderOptions) {
    this.versions = new VersionStore(options.stateDir.path("versions"));
    this.lastError = upgradeError(readUpgradeOutcome(options.stateDir));
  }

  get status(): AgentStatus {
    return this.state;
  }

  get error(): string | undefined {
    return this.lastError;
  }

  /**
   * Accepts a validated request and runs it in the background. Refuses a second one while one
   * runs; a request for the version already running changes nothing.
   */
  start(request: UpgradeRequest): { accepted: boolean; status: AgentStatus } {
    if (this.running || this.restarting) {
      throw new UpgradeBusyError("an upgrade of this host agent is already in progress");
    }
    if (request.version === this.options.currentVersion) {
      this.options.log.info({ version: request.version }, "upgrade requested to the version already running");
      return { accepted: false, status: this.state };
    }
    this.abortController = new AbortController();
    this.setState("updating", undefined);
    this.running = this.run(request, this.abortController.signal).catch((err: unknown) => {
      // Only reachable when recording the failure itself failed (a full disk, say).
      this.options.log.error({ err }, "upgrade failed and its outcome could not be recorded");
      this.setState("running", `upgrade to ${request.version} failed: ${(err as Error).message}`);
      return false;
    });
    void this.running.then((switched) => {
      this.running = undefined;
      this.abortController = undefined;
      // Outside `running`: the restart stops this process, and stopping awaits `abort()`.
      if (switched) {
        this.restarting = true;
        void this.options.restart(request.version);
      }
    });
    return { accepted: true, status: "updating" };
  }

  /** Stops an upgrade in flight (shutdown): the download or unpack is cancelled, nothing switches. */
  async abort(): Promise<void> {
    this.abortController?.abort(new Error("the agent is shutting down"));
    await this.running;
  }

  /** Resolves when the upgrade in flight, if any, has finished or failed. */
  async settled(): Promise<boolean> {
    return (await this.running) ?? false;
  }

  /** True when the new version is current and the process must restart. */
  private async run(request: UpgradeRequest, signal: AbortSignal): Promise<boolean> {
    const { log, stateDir } = this.options;
    const versions = this.versions.ensure();
    const from = this.options.currentVersion;
    log.info({ version: request.version, url: request.url }, "host agent upgrade started");
    let tarball: string | undefined;
    let staging: string | undefined;
    try {
      await versions.prune();
      tarball = versions.tempFile(".tar.gz");
      const { sha256: actual, bytes } = await downloadPackage(request.url, tarball, {
        signal,
        ...(this.options.fetch ? { fetch: this.options.fetch } : {}),
      });
      const expected = request.sha256 ?? (await fetchPublishedSha256(request.url, signal, this.options.fetch));
      if (!expected) {
        throw new Error(`no sha256 was given and ${request.url}.sha256 does not exist; refusing an unverified package`);
      }
      if (actual !== expected) {
        throw new Error(`checksum mismatch: the package's sha256 is ${actual}, expected ${expected}`);
      }
      log.info({ bytes, sha256: actual }, "package downloaded and verified");
      staging = versions.stagingDir();
      await unpackTarball(tarball, staging, signal);
      await verifyPackageDir(staging, request.version);
      signal.throwIfAborted();
      await versions.install(staging, request.version);
      staging = undefined;
      versions.switchTo(request.version);
      writeUpgradeOutcome(stateDir, {
        state: "switched",
        version: request.version,
        from,
        at: new Date().toISOString(),
      });
      log.info({ version: request.version, from }, "switched to the new version; restarting");
    } catch (err) {
      const message = signal.aborted
        ? `upgrade to ${request.version} aborted: ${(signal.reason as Error)?.message ?? "cancelled"}`
        : `upgrade to ${request.version} failed: ${(err as Error).message}`;
      log.error({ err }, message);
      writeUpgradeOutcome(stateDir, {
        state: "failed",
        version: request.version,
        error: message,
        at: new Date().toISOString(),
      });
      this.setState("running", message);
      return false;
    } finally {
      if (tarball) await rm(tarball, { force: true });
      if (staging) await rm(staging, { recursive: true, force: true });
    }
    return true;
  }

  private setState(status: AgentStatus, error: string | undefined): void {
    this.state = status;
    this.lastError = error;
    this.options.onChange({ status, error });
  }
}
