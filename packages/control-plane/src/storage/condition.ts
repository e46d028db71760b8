import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isNoSpace, type StorageFull } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";

/** How often a full storage is probed for space again; only while it is full. */
export const STORAGE_PROBE_INTERVAL_MS = 5_000;
/** The probe's size: a few SQLite pages plus a WAL frame, so space it finds is space a write can use. */
const PROBE_BYTES = 64 * 1024;

export interface StorageState {
  where: StorageFull["where"];
  /** When the condition was first seen (ISO 8601). */
  since: string;
  /** For clients: what is full, never the driver's text. */
  message: string;
}

export interface StorageConditionOptions {
  dataDir: string;
  log: FastifyBaseLogger;
  /**
   * Tries a small write to the database; resolves when it is taken. For PostgreSQL, whose disk
   * only it can probe; SQLite's is the data dir's, which the probe file covers.
   */
  probeDatabase?: () => Promise<void>;
  probeIntervalMs?: number;
}

/**
 * The control plane's "storage full" condition: set by the first write refused for want of
 * space (error handler, operation runner, start-up), reported by /readyz, and cleared by the
 * next write that succeeds or by the periodic probe finding space again. While it is set,
 * nothing is refused up front: every write is still tried, so writes resume the moment space
 * is back, whether or not the probe has run yet.
 */
export class StorageCondition {
  private current: StorageState | undefined;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;
  private readonly cleared: (() => void)[] = [];

  constructor(private readonly options: StorageConditionOptions) {}

  get state(): StorageState | undefined {
    return this.current;
  }

  /** The answer's message: the data dir by name, or (PostgreSQL) the database's disk. */
  message(where: StorageFull["where"]): string {
    return where === "database"
      ? "the database's disk is full; reads work, writes are refused until space is freed there"
      : `the data dir ${this.options.dataDir} is full; reads work, writes are refused until space is freed there`;
  }

  /** A write was refused for want of space. */
  full(what: StorageFull): void {
    if (this.current?.where === what.where) return;
    this.current = { where: what.where, since: new Date().toISOString(), message: this.message(what.where) };
    this.options.log.error(
      { where: what.where, reason: what.reason },
      "storage full: writes refused until space returns",
    );
    this.timer ??= setInterval(() => void this.probe(), this.options.probeIntervalMs ?? STORAGE_PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  /** A write succeeded: whatever was full has room again. */
  written(): void {
    if (!this.current) return;
    const { where, since } = this.current;
    this.current = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    this.options.log.info({ where, since }, "storage has room again: writes resume");
    for (const fn of this.cleared.splice(0)) fn();
  }

  /** Runs `fn` once the condition clears (at once when it is not set): a write put off at start. */
  whenCleared(fn: () => void): void {
    if (this.current) this.cleared.push(fn);
    else fn();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * At start: a data dir with no room for the probe file is full before any write says so,
   * and /readyz should tell from the first answer.
   */
  lookAtStart(): void {
    try {
      this.probeFile();
    } catch (err) {
      if (isNoSpace(err))
        this.full({ where: "data-dir", reason: `no room for a probe file: ${(err as Error).message}` });
    }
  }

  private probeFile(): void {
    const file = join(this.options.dataDir, `.space-probe-${randomBytes(4).toString("hex")}`);
    try {
      writeFileSync(file, Buffer.alloc(PROBE_BYTES), { flag: "wx" });
    } finally {
      rmSync(file, { force: true });
    }
  }

  /** One bounded probe (one small file, or one tiny statement), never two at once. */
  async probe(): Promise<void> {
    const where = this.current?.where;
    if (!where || this.probing) return;
    this.probing = true;
    try {
      if (where === "database") await this.options.probeDatabase?.();
      else this.probeFile();
      this.written();
    } catch {
      // Still full (or the database away): the next tick tries again.
    } finally {
      this.probing = false;
    }
  }
}
