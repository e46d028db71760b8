import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

/** CPU time (user + system) of a process so far, in seconds, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may contain spaces and parentheses; fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the full line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/**
 * CPU time of a process and every process under it, in seconds: each one's own time and that of
 * its children already reaped (a PostgreSQL server: the postmaster, its backends and workers).
 */
export function treeCpuSeconds(rootPid: number): number {
  const children = new Map<number, number[]>();
  const times = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pid = Number(entry);
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    // utime, stime, cutime, cstime: fields 14-17 of the full line.
    times.set(pid, fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0) / CLOCK_TICKS);
  }
  let total = 0;
  const queue = [rootPid];
  for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
    total += times.get(pid) ?? 0;
    queue.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** Resident set size now and at its peak, in MiB, from /proc/<pid>/status. */
export function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/** Samples a process over `seconds`: CPU as % of one core, and RSS (max of 1 s samples). */
export async function sampleWindow(
  pid: number,
  seconds: number,
): Promise<{ cpuPercent: number; rssMiB: number; rssMaxMiB: number }> {
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  let rssMax = 0;
  while (performance.now() - t0 < seconds * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    rssMax = Math.max(rssMax, memoryMiB(pid).rss);
  }
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(pid) - cpu0;
  return { cpuPercent: (cpu / elapsed) * 100, rssMiB: memoryMiB(pid).rss, rssMaxMiB: rssMax };
}
