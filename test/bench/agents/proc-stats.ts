import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

/** CPU time (user + system) of a process so far, in seconds, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may contain spaces and parentheses; fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the full line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
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
