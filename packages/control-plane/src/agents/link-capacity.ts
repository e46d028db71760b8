import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/**
 * How many agent links the control plane takes. Each link holds a socket, a file descriptor:
 * at the process's open-file limit the server could no longer accept its own API's
 * connections, open the database or serve a package, and agents would lock the operator out.
 * So links stop below the limit, leaving a reserve for everything else; an agent refused for
 * capacity gets 503 with Retry-After before the upgrade and comes back later.
 */

export interface OpenFileLimit {
  soft: number;
  hard: number;
}

/** The process's open-file limit (`Max open files` of /proc/self/limits); undefined where unreadable or unlimited. */
export function readOpenFileLimit(limitsFile = "/proc/self/limits"): OpenFileLimit | undefined {
  try {
    const line = readFileSync(limitsFile, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const m = line ? /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(line) : null;
    if (!m || m[1] === "unlimited") return undefined;
    const soft = Number(m[1]);
    return { soft, hard: m[2] === "unlimited" ? soft : Number(m[2]) };
  } catch {
    return undefined;
  }
}

/**
 * Raises the soft open-file limit to the hard one, which any process may do for itself. Node
 * has no setrlimit, so util-linux's prlimit does it on this process. Returns the limit in
 * force afterwards and, when the raise was not possible, why.
 */
export function raiseOpenFileLimit(): { limit: OpenFileLimit | undefined; problem?: string } {
  const before = readOpenFileLimit();
  if (!before || before.soft >= before.hard) return { limit: before };
  try {
    execFileSync("prlimit", [`--pid=${process.pid}`, `--nofile=${before.hard}:${before.hard}`], {
      stdio: "ignore",
      timeout: 5_000,
    });
  } catch (err) {
    return { limit: before, problem: `prlimit failed: ${(err as Error).message}` };
  }
  return { limit: readOpenFileLimit() ?? before };
}

/** The reserve kept for the API, the database and packages: 10% of the limit, at least 64. */
export function defaultLinkLimit(openFiles: number): number {
  return Math.max(1, openFiles - Math.max(64, Math.ceil(openFiles / 10)));
}

/** A link ceiling is "near" from 90% of it: said once per crossing in the log, and in /readyz. */
export const NEAR_FRACTION = 0.9;

/** Seconds an agent refused for capacity is told to wait: long enough for others to leave, spread by jitter. */
export const CAPACITY_RETRY_AFTER_S = 30;

export class LinkCapacity {
  private nearSaid = false;

  constructor(
    /** The most links held at once. */
    readonly limit: number,
    private readonly onNear: (open: number, limit: number) => void,
  ) {}

  /** Whether one more link may be taken while `open` are held. */
  admits(open: number): boolean {
    return open < this.limit;
  }

  /** Call when the count of links changed: says once when it crosses into "near". */
  observe(open: number): void {
    const near = this.isNear(open);
    if (near && !this.nearSaid) this.onNear(open, this.limit);
    this.nearSaid = near;
  }

  isNear(open: number): boolean {
    return open >= Math.floor(this.limit * NEAR_FRACTION);
  }
}
