import type { ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { ask } from "../agents/children.ts";
import { log } from "./replica-set.ts";

/**
 * While a fleet links (issue 17: 45,000 agents once stalled near 34,500 with no reason seen),
 * says every BENCH_WATCH_S seconds why links fail: the simulators' tally of link events
 * (test/sim SimAgentInit.onLinkEvent: errno codes, HTTP statuses, close codes and reasons),
 * the kernel's TCP counters that name a cause (listen queue overflows, aborts for memory,
 * TIME_WAIT overflow, failed connects), `ss -s` and new kernel log lines about TCP.
 */

const WATCH_MS = Number(process.env.BENCH_WATCH_S ?? 30) * 1000;

/** Kernel counters (/proc/net/netstat and /proc/net/snmp) whose growth names a reason for lost links. */
const COUNTERS = [
  "Tcp:ActiveOpens",
  "Tcp:AttemptFails",
  "Tcp:EstabResets",
  "Tcp:CurrEstab",
  "TcpExt:ListenOverflows",
  "TcpExt:ListenDrops",
  "TcpExt:TCPAbortOnMemory",
  "TcpExt:TCPMemoryPressures",
  "TcpExt:TCPAbortOnTimeout",
  "TcpExt:TCPTimeWaitOverflow",
  "TcpExt:TCPBacklogDrop",
  "TcpExt:TCPReqQFullDrop",
  "TcpExt:SyncookiesSent",
];

/** Every counter of /proc/net/{netstat,snmp}, as "Group:Name". */
export function kernelCounters(files = ["/proc/net/netstat", "/proc/net/snmp"]): Map<string, number> {
  const counters = new Map<string, number>();
  for (const file of files) {
    const lines = readFileSync(file, "utf8").trim().split("\n");
    // Pairs of lines: "Group: names…" then "Group: values…".
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const [group, ...names] = (lines[i] as string).split(/\s+/);
      const values = (lines[i + 1] as string).split(/\s+/).slice(1);
      for (const [j, name] of names.entries()) counters.set(`${group}${name}`, Number(values[j]));
    }
  }
  return counters;
}

const TCP_KERNEL_LINE = /tcp|conntrack|out of memory|socket|port/i;

function kernelLog(): string[] {
  try {
    return execFileSync("dmesg", { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")
      .filter((l) => TCP_KERNEL_LINE.test(l));
  } catch {
    return ["(dmesg unreadable)"];
  }
}

function ssSummary(): string {
  try {
    const out = execFileSync("ss", ["-s"], { encoding: "utf8" });
    return (
      out
        .split("\n")
        .find((l) => l.startsWith("TCP:"))
        ?.trim() ?? out.trim()
    );
  } catch (err) {
    return `ss -s failed: ${(err as Error).message}`;
  }
}

/** Each replica's listen socket: connections waiting to be accepted / the backlog (`ss -ltn` Recv-Q / Send-Q). */
function acceptQueues(bases: readonly string[]): string {
  try {
    const lines = execFileSync("ss", ["-ltnH"], { encoding: "utf8" }).split("\n");
    return bases
      .map((base) => {
        const port = new URL(base).port;
        const cols = lines.find((l) => l.split(/\s+/)[3]?.endsWith(`:${port}`))?.split(/\s+/);
        return `:${port} ${cols ? `${cols[1]}/${cols[2]}` : "?"}`;
      })
      .join(", ");
  } catch (err) {
    return `ss -ltn failed: ${(err as Error).message}`;
  }
}

/** The workers' link-event tallies summed. */
export async function fleetTally(workers: readonly ChildProcess[]): Promise<Map<string, number>> {
  const sum = new Map<string, number>();
  const answers = await Promise.all(
    workers.map((w) =>
      ask<{ counts: Record<string, number> }>(w, { type: "tally" }, "tally", 30_000).catch(() => ({ counts: {} })),
    ),
  );
  for (const { counts } of answers)
    for (const [event, n] of Object.entries(counts)) sum.set(event, (sum.get(event) ?? 0) + n);
  return sum;
}

/** Links held now by a tally: welcomes less links that ended. */
function heldNow(tally: Map<string, number>): number {
  let n = 0;
  for (const [event, count] of tally) {
    if (event === "linked") n += count;
    else if (event.startsWith("link dropped")) n -= count;
  }
  return n;
}

export function formatTally(tally: Map<string, number>): string {
  return [...tally]
    .sort((a, b) => b[1] - a[1])
    .map(([event, n]) => `    ${String(n).padStart(7)}  ${event}`)
    .join("\n");
}

/**
 * How long each replica takes to answer /readyz, and what: a replica whose event loop is behind
 * answers late (its accept queue and its agents' handshakes wait as long).
 */
async function readiness(bases: readonly string[]): Promise<string> {
  const answers = await Promise.all(
    bases.map(async (base) => {
      const t = performance.now();
      try {
        const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(20_000) });
        const body = (await res.json()) as { status?: string };
        return `${res.status} ${body.status ?? ""} in ${(performance.now() - t).toFixed(0)} ms`;
      } catch (err) {
        return `${(err as Error).name} after ${(performance.now() - t).toFixed(0)} ms`;
      }
    }),
  );
  return answers.map((a, i) => `${bases[i]}: ${a}`).join("; ");
}

/** Watches until the returned stop() is called; stop() prints the last figures. */
export function watchLinks(
  label: string,
  workers: () => readonly ChildProcess[],
  replicaBases: readonly string[],
): { stop(): Promise<void> } {
  const counters0 = kernelCounters();
  const dmesg0 = kernelLog().length;
  const t0 = performance.now();
  const report = async () => {
    const [tally, ready] = await Promise.all([fleetTally(workers()), readiness(replicaBases)]);
    const counters = kernelCounters();
    const deltas = COUNTERS.map((c) => {
      const now = counters.get(c) ?? Number.NaN;
      // CurrEstab is a level, the others counters: their growth since the watch began.
      return `${c.split(":")[1]} ${c === "Tcp:CurrEstab" ? now : now - (counters0.get(c) ?? 0)}`;
    });
    const fresh = kernelLog().slice(dmesg0);
    log(
      [
        `${label}: ${((performance.now() - t0) / 1000).toFixed(0)} s, ${heldNow(tally)} links held; link events:`,
        formatTally(tally),
        `  ss -s: ${ssSummary()}`,
        `  /readyz: ${ready}`,
        `  accept queues (waiting/backlog): ${acceptQueues(replicaBases)}`,
        `  kernel TCP counters since the start: ${deltas.join(", ")}`,
        `  new kernel log lines about TCP: ${fresh.length ? `\n    ${fresh.slice(-10).join("\n    ")}` : "none"}`,
      ].join("\n"),
    );
  };
  let running = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(report).catch((err: unknown) => log(`${label}: watch failed: ${String(err)}`));
  }, WATCH_MS);
  return {
    async stop() {
      clearInterval(timer);
      await running;
      await report();
    },
  };
}
