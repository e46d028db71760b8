import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs";

/**
 * The kernel's start time of a process (field 22 of /proc/<pid>/stat, in clock ticks since
 * boot), or undefined when there is no such live process. A pid plus its start time names one
 * process for good: a recycled pid has a different start time, so a stale pid file can never
 * make us signal a stranger. Zombies count as gone.
 */
export function processStartTime(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (fields[0] === "Z" || fields[0] === "X") return undefined;
  return fields[19];
}

export function isSameProcess(pid: number | null | undefined, startTime: string | null | undefined): boolean {
  if (!pid || !startTime) return false;
  return processStartTime(pid) === startTime;
}

/** Signals one process only (not its group); a process already gone is not an error. */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** Sends a signal to a process group (detached services lead their own), falling back to the pid. */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** The last `lines` lines of a log file (reads at most the last 8 KiB), "" when there is none. */
export function logTail(path: string, lines = 8): string {
  let fd: number | undefined;
  try {
    const size = statSync(path).size;
    const length = Math.min(size, 8192);
    const buffer = Buffer.alloc(length);
    fd = openSync(path, "r");
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString("utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
