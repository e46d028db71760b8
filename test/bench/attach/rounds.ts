import { median } from "../support/median.ts";
import type { RealAgentsResult } from "./real-agents.ts";

/**
 * Several runs of the real agents folded into one result of medians: each step's time, each
 * phase's time per host, each master service's RSS and CPU. A single run on a shared 2-core
 * machine moves by a few hundred ms; the medians of runs taken in turn with the other revision's
 * are what the side-by-side compares.
 */
export function medianResult(runs: readonly RealAgentsResult[]): RealAgentsResult {
  const of = (pick: (r: RealAgentsResult) => number | null | undefined) => {
    const values = runs.map(pick).filter((v): v is number => typeof v === "number");
    return values.length > 0 ? median(values) : undefined;
  };
  const phases = new Map<string, Record<string, number | null>>();
  for (const id of new Set(runs.flatMap((r) => [...r.phases.keys()]))) {
    const hosts = new Set(runs.flatMap((r) => Object.keys(r.phases.get(id) ?? {})));
    const row: Record<string, number | null> = {};
    // null: the phase did not run on that host in any run (a role's phase list).
    for (const host of hosts) row[host] = of((r) => r.phases.get(id)?.[host]) ?? null;
    phases.set(id, row);
  }
  const services = [...new Set(runs.flatMap((r) => r.masterServices.map((s) => s.service)))];
  const service = (r: RealAgentsResult, name: string) => r.masterServices.find((s) => s.service === name);
  return {
    masterAttachMs: of((r) => r.masterAttachMs) ?? 0,
    workersAttachMs: of((r) => r.workersAttachMs) ?? 0,
    detachAllMs: of((r) => r.detachAllMs) ?? 0,
    phases,
    masterServices: services.map((name) => ({
      service: name,
      rssMiB: of((r) => service(r, name)?.rssMiB) ?? 0,
      cpuPercent: of((r) => service(r, name)?.cpuPercent) ?? 0,
    })),
    errors: runs.flatMap((r, i) => r.errors.map((e) => `run ${i + 1}: ${e}`)),
  };
}
