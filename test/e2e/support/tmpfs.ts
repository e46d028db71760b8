import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A small tmpfs a test mounts (root is available in tests and CI) to run a disk full for real. */
export interface Tmpfs {
  dir: string;
  /** Bytes free now. */
  free(): number;
  /**
   * Fills the disk with a filler file, leaving `leaveBytes` free: fallocate for the bulk, then
   * zeros written until ENOSPC when nothing is to be left.
   */
  fill(leaveBytes?: number): void;
  /** Removes the filler: the space comes back. */
  unfill(): void;
  /** Unmounts (lazily when something still holds it) and removes the mount point. */
  remove(): void;
}

export function mountTmpfs(size: string): Tmpfs {
  const dir = mkdtempSync(join(tmpdir(), "keelson-tmpfs-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  const filler = join(dir, "filler");
  const free = () => {
    const s = statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  };
  return {
    dir,
    free,
    fill(leaveBytes = 0) {
      const bulk = free() - leaveBytes;
      if (bulk > 0) execFileSync("fallocate", ["-l", String(bulk), filler]);
      if (leaveBytes > 0) return;
      const fd = openSync(`${filler}-zeros`, "w");
      try {
        const zeros = Buffer.alloc(4096);
        for (;;) writeSync(fd, zeros);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
      } finally {
        closeSync(fd);
      }
    },
    unfill() {
      rmSync(filler, { force: true });
      rmSync(`${filler}-zeros`, { force: true });
    },
    remove() {
      try {
        execFileSync("umount", [dir], { stdio: "ignore" });
      } catch {
        execFileSync("umount", ["-l", dir], { stdio: "ignore" });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
