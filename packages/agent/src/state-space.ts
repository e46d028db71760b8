import { statfsSync } from "node:fs";
import { resolve, sep } from "node:path";
import type { HostCondition } from "@keelson/protocol";
import { onNoSpace } from "./services/atomic-file.ts";

/**
 * Below this much free space the state dir counts as full: its largest file (the phase states
 * of a 21-phase node) is a few KiB and each is written by temp file and rename, so a disk this
 * close to full will refuse the next write.
 */
export const STATE_DIR_RESERVE_BYTES = 256 * 1024;

/**
 * Watches the agent's state dir for a full disk and turns it into the host's `state_dir_full`
 * condition (reported with the facts, shown on the host record). A write refused for space
 * raises it at once; the facts tick checks the free space and clears it once there is room,
 * but not before one tick with room after the last refused write (a file that did not fit
 * may need more than the reserve).
 */
export class StateDirSpace {
  private readonly root: string;
  private since: string | undefined;
  private refusedSinceCheck = false;
  private readonly unsubscribe: () => void;

  constructor(
    root: string,
    /** Called when the condition appears (a write refused), so the facts go out at once. */
    private readonly onRefused: () => void,
    private readonly freeBytes: (dir: string) => number = statfsFree,
  ) {
    this.root = resolve(root);
    this.unsubscribe = onNoSpace((path) => {
      if (!this.holds(path)) return;
      this.refusedSinceCheck = true;
      const fresh = this.since === undefined;
      this.since ??= new Date().toISOString();
      if (fresh) this.onRefused();
    });
  }

  /** The current condition, after a look at the free space. */
  check(): HostCondition[] {
    let free: number;
    try {
      free = this.freeBytes(this.root);
    } catch {
      free = Number.POSITIVE_INFINITY;
    }
    if (free < STATE_DIR_RESERVE_BYTES) this.since ??= new Date().toISOString();
    else if (this.refusedSinceCheck) this.refusedSinceCheck = false;
    else this.since = undefined;
    return this.conditions();
  }

  /** The condition as last seen, without a look at the disk. */
  conditions(): HostCondition[] {
    if (this.since === undefined) return [];
    return [
      {
        code: "state_dir_full",
        message: `the agent's state dir ${this.root} is full: state files keep their last content until space is freed there`,
        since: this.since,
      },
    ];
  }

  close(): void {
    this.unsubscribe();
  }

  private holds(path: string): boolean {
    const full = resolve(path);
    return full === this.root || full.startsWith(this.root + sep);
  }
}

function statfsFree(dir: string): number {
  const s = statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
}
