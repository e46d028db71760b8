import { type BackupReportFrame, urlHost } from "@keelson/protocol";
import type { Logger } from "pino";
import type { NodeConfig } from "../phases/config.ts";
import { findBinary } from "../phases/context.ts";
import { nodePaths } from "../phases/paths.ts";
import { backupPlanOf } from "./plan.ts";
import { type BackupRunReport, BackupScheduler, type Clock } from "./scheduler.ts";
import { type SnapshotTarget, saveSnapshot } from "./snapshot.ts";

export type BackupReport = Omit<BackupReportFrame, "type">;

export interface EtcdBackupsOptions {
  log: Logger;
  /** Sends a report to the control plane; false when the link is down (resent on connect). */
  send: (report: BackupReport) => boolean;
  /** One minute in ms (60 000); a test knob (KEELSON_BACKUP_MINUTE_MS) shortens it. */
  minuteMs?: number;
  clock?: Clock;
  snapshotTimeoutMs?: number;
}

/**
 * The agent's etcd backups. Every master backs up its own etcd member to its own disk
 * (spec `storageType` local): simpler than electing one master, and each master keeps copies
 * that survive the loss of the others. The node controller hands over the node's config
 * whenever the membership or the cluster settings change; workers and hosts in no cluster
 * have no backups.
 */
export class EtcdBackups {
  private readonly scheduler: BackupScheduler;
  private readonly minuteMs: number;
  private clusterId: string | undefined;
  private target: SnapshotTarget | undefined;
  private last: BackupReport | undefined;

  constructor(private readonly options: EtcdBackupsOptions) {
    this.minuteMs = options.minuteMs ?? 60_000;
    this.scheduler = new BackupScheduler({
      clock: options.clock,
      retryMs: 5 * this.minuteMs,
      snapshot: (file, signal) => {
        if (!this.target) throw new Error("no etcd to back up on this node");
        return saveSnapshot(this.target, file, signal);
      },
      report: (r) => this.report(r),
    });
  }

  /** The node's current config (undefined: in no cluster). */
  apply(config: NodeConfig | undefined): void {
    if (config?.role !== "master") {
      this.stop();
      return;
    }
    const result = backupPlanOf(config.cluster as unknown as Record<string, unknown>, config.hostRoot, this.minuteMs);
    if (config.clusterId !== this.clusterId) this.last = undefined;
    this.clusterId = config.clusterId;
    if (result.kind === "off") {
      this.scheduler.configure(undefined);
      return;
    }
    if (result.kind === "invalid") {
      this.scheduler.configure(undefined);
      this.report({ ok: false, error: `cannot schedule etcd backups: ${result.error}`, at: new Date().toISOString() });
      return;
    }
    try {
      this.target = targetOf(config, this.options.snapshotTimeoutMs ?? 5 * 60_000);
    } catch (err) {
      this.scheduler.configure(undefined);
      this.report({
        ok: false,
        error: `cannot schedule etcd backups: ${(err as Error).message}`,
        at: new Date().toISOString(),
      });
      return;
    }
    if (!this.scheduler.configure(result.plan)) return;
    const due = this.scheduler.due;
    this.options.log.info(
      {
        dir: result.plan.dir,
        nextInterval: due.interval && new Date(due.interval).toISOString(),
        nextDaily: due.daily && new Date(due.daily).toISOString(),
      },
      "etcd backups scheduled",
    );
  }

  /** The link is back: the control plane hears the latest result it may have missed. */
  connected(): void {
    if (this.last) this.options.send(this.last);
  }

  async close(): Promise<void> {
    await this.scheduler.close();
  }

  private stop(): void {
    this.scheduler.configure(undefined);
    this.clusterId = undefined;
    this.target = undefined;
    this.last = undefined;
  }

  private report(run: BackupRunReport): void {
    const clusterId = this.clusterId;
    if (!clusterId) return;
    const report: BackupReport = {
      clusterId,
      ok: run.ok,
      at: run.at,
      ...(run.error ? { error: run.error.slice(0, 4096) } : {}),
      ...(run.file ? { file: run.file } : {}),
    };
    if (run.ok) this.options.log.info({ file: run.file, kind: run.kind }, "etcd backup taken");
    else this.options.log.warn({ error: run.error, kind: run.kind }, "etcd backup failed");
    this.last = report;
    this.options.send(report);
  }
}

/** This master's own member, over the client TLS the etcd phases set up. */
function targetOf(config: NodeConfig, timeoutMs: number): SnapshotTarget {
  const paths = nodePaths(config.hostRoot);
  const host = urlHost(config.primaryIp);
  return {
    etcdctl: findBinary(config.nodePackage, "etcdctl"),
    endpoint: `https://${host}:${config.ports.etcdClient}`,
    tls: { caCert: paths.caCert, cert: paths.cert("etcd-client"), key: paths.key("etcd-client") },
    timeoutMs,
  };
}
