import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { backupFileName, listBackups, newestBackupTime, pruneBackups } from "../../src/backups/files.ts";
import { backupPlanOf, DEFAULT_BACKUP_DIR } from "../../src/backups/plan.ts";
import { type BackupRunReport, BackupScheduler, type Clock, nextDailyAt } from "../../src/backups/scheduler.ts";

/** A clock that moves only when told; timers fire in due order as it passes them. */
class ManualClock implements Clock {
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;
  constructor(public current: number) {}
  now = () => this.current;
  setTimeout = (fn: () => void, ms: number) => {
    const id = ++this.ids;
    this.timers.push({ at: this.current + ms, fn, id });
    return id;
  };
  clearTimeout = (handle: unknown) => {
    this.timers = this.timers.filter((t) => t.id !== handle);
  };
  /** Moves to `to`, firing every timer due on the way and letting the runs they start settle. */
  async advanceTo(to: number, scheduler: BackupScheduler): Promise<void> {
    for (;;) {
      const next = this.timers.filter((t) => t.at <= to).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.at);
      next.fn();
      await scheduler.idle();
    }
    this.current = to;
  }
  get pending(): number {
    return this.timers.length;
  }
}

const MIN = 60_000;
const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "k-bk-"));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A scheduler whose snapshots are files with the clock's time in them, recording every report. */
function setup(options: { failWith?: string; snapshotMs?: number } = {}) {
  const clock = new ManualClock(T0);
  const reports: BackupRunReport[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const scheduler = new BackupScheduler({
    clock,
    retryMs: 5 * MIN,
    report: (r) => reports.push(r),
    snapshot: async (file) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        if (options.snapshotMs) await new Promise((r) => setTimeout(r, options.snapshotMs));
        if (options.failWith) throw new Error(options.failWith);
        writeFileSync(file, String(clock.now()));
      } finally {
        inFlight--;
      }
    },
  });
  return { clock, reports, scheduler, maxInFlight: () => maxInFlight };
}

describe("backup plan from the cluster settings", () => {
  it("is off unless isEtcdBackupEnabled is true", () => {
    expect(backupPlanOf({ intervalInMins: 5, maxIntervalBackupCount: 2 }, "/h").kind).toBe("off");
  });

  it("puts backups under the host root, at the default path when localPath is absent", () => {
    const result = backupPlanOf({ isEtcdBackupEnabled: true, intervalInHours: 2, maxIntervalBackupCount: 3 }, "/h");
    expect(result).toEqual({
      kind: "plan",
      plan: { dir: join("/h", DEFAULT_BACKUP_DIR), interval: { everyMs: 2 * 60 * MIN, keep: 3 } },
    });
  });

  it("reads dailyBackupTime as UTC hh:mm and a shortened minute for intervals only", () => {
    const result = backupPlanOf(
      {
        isEtcdBackupEnabled: true,
        intervalInMins: 1,
        maxIntervalBackupCount: 2,
        dailyBackupTime: "02:30",
        maxTimestampBackupCount: 7,
        storageType: "local",
        localPath: "/backups/etcd",
      },
      "/h",
      500,
    );
    expect(result).toEqual({
      kind: "plan",
      plan: { dir: "/h/backups/etcd", interval: { everyMs: 500, keep: 2 }, daily: { hour: 2, minute: 30, keep: 7 } },
    });
  });

  it("refuses what cannot be scheduled, saying why", () => {
    const bad = (s: Record<string, unknown>) => backupPlanOf({ isEtcdBackupEnabled: true, ...s }, "/h");
    expect(bad({})).toMatchObject({ kind: "invalid", error: expect.stringMatching(/neither an interval/) });
    expect(bad({ intervalInMins: 5 })).toMatchObject({ error: expect.stringMatching(/maxIntervalBackupCount/) });
    expect(bad({ dailyBackupTime: "25:00", maxTimestampBackupCount: 1 })).toMatchObject({
      error: expect.stringMatching(/not HH:MM/),
    });
    expect(bad({ storageType: "s3", intervalInMins: 1, maxIntervalBackupCount: 1 })).toMatchObject({
      error: expect.stringMatching(/local only/),
    });
  });
});

describe("backup files and retention", () => {
  it("names interval backups by UTC timestamp and daily ones by UTC date", () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(backupFileName("interval", at)).toBe("etcd-interval-20260102T030405Z.db");
    expect(backupFileName("daily", at)).toBe("etcd-daily-2026-01-02.db");
  });

  it("prunes the oldest of one kind only, beyond the count", () => {
    const dir = tempDir();
    const names = [0, 1, 2, 3].map((i) => backupFileName("interval", new Date(T0 + i * MIN)));
    // Written out of order: age comes from the name, not the write order.
    for (const n of [...names].reverse()) writeFileSync(join(dir, n), "x");
    writeFileSync(join(dir, "etcd-daily-2026-11-20.db"), "x");
    writeFileSync(join(dir, "unrelated.db"), "x");
    expect(pruneBackups(dir, "interval", 2)).toEqual(names.slice(0, 2));
    expect(readdirSync(dir).sort()).toEqual(["etcd-daily-2026-11-20.db", ...names.slice(2), "unrelated.db"].sort());
    expect(newestBackupTime(dir, "interval")).toBe(T0 + 3 * MIN);
    expect(newestBackupTime(dir, "daily")).toBe(Date.UTC(2026, 10, 20));
  });
});

describe("backup scheduler", () => {
  it("computes the next daily time in UTC: today if still ahead, else tomorrow", () => {
    expect(nextDailyAt(T0, 10, 30)).toBe(T0 + 30 * MIN);
    expect(nextDailyAt(T0, 10, 0)).toBe(T0);
    expect(nextDailyAt(T0 + 1, 10, 0)).toBe(T0 + 24 * 60 * MIN);
    expect(nextDailyAt(T0, 9, 59)).toBe(T0 + 24 * 60 * MIN - MIN);
  });

  it("takes interval backups every interval and keeps the newest N", async () => {
    const dir = tempDir();
    const { clock, reports, scheduler } = setup();
    scheduler.configure({ dir, interval: { everyMs: 10 * MIN, keep: 3 } });
    expect(scheduler.due.interval).toBe(T0 + 10 * MIN);
    await clock.advanceTo(T0 + 10 * MIN - 1, scheduler);
    expect(reports).toEqual([]);
    await clock.advanceTo(T0 + 55 * MIN, scheduler);
    // Runs at 10, 20, 30, 40, 50 minutes.
    expect(reports.map((r) => r.ok)).toEqual([true, true, true, true, true]);
    expect(listBackups(dir, "interval")).toEqual(
      [30, 40, 50].map((m) => backupFileName("interval", new Date(T0 + m * MIN))),
    );
    expect(reports.at(-1)?.file).toBe(join(dir, backupFileName("interval", new Date(T0 + 50 * MIN))));
    await scheduler.close();
    expect(clock.pending).toBe(0);
  });

  it("keeps the cadence of the newest backup on disk across a restart", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, backupFileName("interval", new Date(T0 - 4 * MIN))), "old");
    const { scheduler } = setup();
    scheduler.configure({ dir, interval: { everyMs: 10 * MIN, keep: 3 } });
    expect(scheduler.due.interval).toBe(T0 + 6 * MIN);
    await scheduler.close();
  });

  it("takes daily backups at hh:mm UTC, one per day, keeping the newest N", async () => {
    const dir = tempDir();
    const { clock, reports, scheduler } = setup();
    scheduler.configure({ dir, daily: { hour: 2, minute: 30, keep: 2 } });
    expect(new Date(scheduler.due.daily ?? 0).toISOString()).toBe("2026-11-23T02:30:00.000Z");
    await clock.advanceTo(T0 + 4 * 24 * 60 * MIN, scheduler);
    expect(reports).toHaveLength(4);
    expect(listBackups(dir, "daily")).toEqual(["etcd-daily-2026-11-25.db", "etcd-daily-2026-11-26.db"]);
    await scheduler.close();
  });

  it("never runs two backups at once: a kind due during a run waits for it", async () => {
    const dir = tempDir();
    const { clock, reports, scheduler, maxInFlight } = setup({ snapshotMs: 20 });
    // Both kinds come due at 10:30 (interval 30 minutes from 10:00, daily 10:30).
    scheduler.configure({ dir, interval: { everyMs: 30 * MIN, keep: 5 }, daily: { hour: 10, minute: 30, keep: 5 } });
    await clock.advanceTo(T0 + 30 * MIN, scheduler);
    expect(reports.map((r) => r.kind)).toEqual(["interval", "daily"]);
    expect(maxInFlight()).toBe(1);
    await scheduler.close();
  });

  it("reports a failed run and retries sooner than the interval", async () => {
    const dir = tempDir();
    const { clock, reports, scheduler } = setup({ failWith: "etcd is not answering" });
    scheduler.configure({ dir, interval: { everyMs: 60 * MIN, keep: 1 } });
    await clock.advanceTo(T0 + 60 * MIN, scheduler);
    expect(reports).toEqual([expect.objectContaining({ ok: false, error: "etcd is not answering", kind: "interval" })]);
    expect(scheduler.due.interval).toBe(T0 + 65 * MIN);
    expect(listBackups(dir, "interval")).toEqual([]);
    await scheduler.close();
  });

  it("reports at once when the backup directory cannot be made", async () => {
    const dir = tempDir();
    const file = join(dir, "a-file");
    writeFileSync(file, "not a directory");
    const { reports, scheduler, clock } = setup();
    scheduler.configure({ dir: join(file, "backups"), interval: { everyMs: MIN, keep: 1 } });
    expect(reports).toEqual([expect.objectContaining({ ok: false, error: expect.stringMatching(/cannot create/) })]);
    expect(clock.pending).toBe(0);
  });

  it("re-reads a changed plan and stops when backups are turned off", async () => {
    const dir = tempDir();
    const { clock, reports, scheduler } = setup();
    scheduler.configure({ dir, interval: { everyMs: 60 * MIN, keep: 2 } });
    // The same plan again (a re-sent join) keeps the schedule as it is.
    scheduler.configure({ dir, interval: { everyMs: 60 * MIN, keep: 2 } });
    expect(clock.pending).toBe(1);
    scheduler.configure({ dir, interval: { everyMs: 5 * MIN, keep: 2 } });
    expect(scheduler.due.interval).toBe(T0 + 5 * MIN);
    await clock.advanceTo(T0 + 5 * MIN, scheduler);
    expect(reports).toHaveLength(1);
    scheduler.configure(undefined);
    expect(clock.pending).toBe(0);
    await clock.advanceTo(T0 + 120 * MIN, scheduler);
    expect(reports).toHaveLength(1);
    expect(existsSync(dir)).toBe(true);
  });
});
