import { PHASES } from "../../../packages/protocol/src/phases.ts";
import { markdownTable } from "../support/markdown-table.ts";
import { HOSTS, type RealAgentsResult } from "./real-agents.ts";

/**
 * The real agents' figures of two revisions measured in one run, side by side: the previous
 * release's (its own keelson-server, keelson-agent and test node package) and this tree's.
 */

export interface Measured {
  label: string;
  result: RealAgentsResult;
}

const ms = (v: number | null | undefined) => (v === undefined ? "–" : v === null ? "(not run)" : v.toFixed(0));
const signed = (v: number, digits = 0) => `${v >= 0 ? "+" : ""}${v.toFixed(digits)}`;
const delta = (a: number | null | undefined, b: number | null | undefined) =>
  typeof a === "number" && typeof b === "number" ? signed(b - a) : "–";
const percent = (a: number, b: number) => (a > 0 ? `${signed(((b - a) / a) * 100)}%` : "–");

/** This tree's phase order, then any phase only the other revision reports. */
function phaseIds(prev: RealAgentsResult, cur: RealAgentsResult): string[] {
  const known = PHASES.map((p) => p.id as string);
  const extra = [...prev.phases.keys(), ...cur.phases.keys()].filter((id) => !known.includes(id));
  return [...known, ...new Set(extra)];
}

function phaseSum(result: RealAgentsResult, host: string): number {
  return [...result.phases.values()].reduce((sum, row) => sum + (row[host] ?? 0), 0);
}

function attachTable(prev: Measured, cur: Measured): string {
  const rows: [string, number, number][] = [
    ["attach 1 master", prev.result.masterAttachMs, cur.result.masterAttachMs],
    ["attach 2 workers (1 request)", prev.result.workersAttachMs, cur.result.workersAttachMs],
    ["detach all 3 (1 request)", prev.result.detachAllMs, cur.result.detachAllMs],
  ];
  return markdownTable(
    ["step (request to operation finished)", `${prev.label} ms`, `${cur.label} ms`, "Δ ms", "Δ %"],
    rows.map(([step, a, b]) => [step, a.toFixed(0), b.toFixed(0), signed(b - a), percent(a, b)]),
  );
}

function phasesTable(prev: Measured, cur: Measured): string {
  const [master, ...workers] = HOSTS;
  const head = [
    "phase",
    `master ${prev.label}`,
    `master ${cur.label}`,
    "master Δ",
    ...workers.flatMap((w) => [`${w.name} ${prev.label}`, `${w.name} ${cur.label}`]),
  ];
  const cells = (id: string) => {
    const a = prev.result.phases.get(id) ?? {};
    const b = cur.result.phases.get(id) ?? {};
    return [
      ms(a[master.name]),
      ms(b[master.name]),
      delta(a[master.name], b[master.name]),
      ...workers.flatMap((w) => [ms(a[w.name]), ms(b[w.name])]),
    ];
  };
  const sums = [
    phaseSum(prev.result, master.name).toFixed(0),
    phaseSum(cur.result, master.name).toFixed(0),
    signed(phaseSum(cur.result, master.name) - phaseSum(prev.result, master.name)),
    ...workers.flatMap((w) => [phaseSum(prev.result, w.name).toFixed(0), phaseSum(cur.result, w.name).toFixed(0)]),
  ];
  return markdownTable(head, [
    ...phaseIds(prev.result, cur.result).map((id) => [id, ...cells(id)]),
    ["sum of phases", ...sums],
  ]);
}

type Service = RealAgentsResult["masterServices"][number];

function servicesTable(prev: Measured, cur: Measured): string {
  const byName = (r: RealAgentsResult) => new Map(r.masterServices.map((s) => [s.service, s]));
  const a = byName(prev.result);
  const b = byName(cur.result);
  const names = [...new Set([...b.keys(), ...a.keys()])].sort(
    (x, y) => (b.get(y)?.rssMiB ?? a.get(y)?.rssMiB ?? 0) - (b.get(x)?.rssMiB ?? a.get(x)?.rssMiB ?? 0),
  );
  const mib = (s: Service | undefined) => (s ? s.rssMiB.toFixed(1) : "–");
  const cpu = (s: Service | undefined) => (s ? s.cpuPercent.toFixed(1) : "–");
  const total = (m: Map<string, Service>) => [...m.values()].reduce((sum, s) => sum + s.rssMiB, 0);
  return markdownTable(
    [
      "master service",
      `RSS MiB ${prev.label}`,
      `RSS MiB ${cur.label}`,
      "Δ MiB",
      `CPU % ${prev.label}`,
      `CPU % ${cur.label}`,
    ],
    [
      ...names.map((n) => {
        const x = a.get(n);
        const y = b.get(n);
        return [n, mib(x), mib(y), x && y ? signed(y.rssMiB - x.rssMiB, 1) : "–", cpu(x), cpu(y)];
      }),
      ["all", total(a).toFixed(1), total(b).toFixed(1), signed(total(b) - total(a), 1), "", ""],
    ],
  );
}

/** What the services this tree adds to a master (and everything else that changed) cost. */
function costLines(prev: Measured, cur: Measured): string[] {
  const before = new Set(prev.result.masterServices.map((s) => s.service));
  const after = new Set(cur.result.masterServices.map((s) => s.service));
  const added = cur.result.masterServices.filter((s) => !before.has(s.service));
  const gone = prev.result.masterServices.filter((s) => !after.has(s.service));
  const rss = (list: Service[]) => list.reduce((sum, s) => sum + s.rssMiB, 0);
  const cpu = (list: Service[]) => list.reduce((sum, s) => sum + s.cpuPercent, 0);
  const master = HOSTS[0].name;
  const changed = phaseIds(prev.result, cur.result)
    .map((id) => ({ id, a: prev.result.phases.get(id)?.[master], b: cur.result.phases.get(id)?.[master] }))
    .filter((p): p is { id: string; a: number; b: number } => typeof p.a === "number" && typeof p.b === "number")
    .sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a))
    .slice(0, 3);
  const [a, b] = [prev.result, cur.result];
  return [
    added.length > 0
      ? `Services new on the master since ${prev.label}: ${added.map((s) => s.service).join(", ")}: ${rss(added).toFixed(1)} MiB steady RSS, ${cpu(added).toFixed(1)}% of a core.`
      : `Services new on the master since ${prev.label}: none (both run the same ${after.size}: ${[...after].sort().join(", ")}).`,
    ...(gone.length > 0 ? [`Services gone since ${prev.label}: ${gone.map((s) => s.service).join(", ")}.`] : []),
    `Cost per master, ${cur.label} against ${prev.label}: steady RSS of its services ${signed(rss(b.masterServices) - rss(a.masterServices), 1)} MiB (${rss(a.masterServices).toFixed(1)} → ${rss(b.masterServices).toFixed(1)} MiB); attach ${signed(b.masterAttachMs - a.masterAttachMs)} ms (${a.masterAttachMs.toFixed(0)} → ${b.masterAttachMs.toFixed(0)} ms), its phases' sum ${signed(phaseSum(b, master) - phaseSum(a, master))} ms.`,
    `Largest changes of the master's phases: ${changed.map((p) => `${p.id} ${signed(p.b - p.a)} ms (${ms(p.a)} → ${ms(p.b)})`).join(", ")}.`,
  ];
}

export function sideBySide(prev: Measured, cur: Measured, order: string): string {
  return [
    "",
    `Real agents, ${prev.label} (previous) beside ${cur.label} (this tree) — 1 master then 2 workers, each revision's own keelson-server, keelson-agent and test node package under this tree's harness; ${order}`,
    ...[prev, cur].flatMap((m) =>
      m.result.errors.length > 0 ? [`errors (${m.label}): ${m.result.errors.join("; ")}`] : [],
    ),
    "",
    attachTable(prev, cur),
    "",
    "Wall time of each phase's last start as the agent reports it, ms (durationMs; – = not a phase of that role, drain-pods is stop-only):",
    "",
    phasesTable(prev, cur),
    "",
    "The master's services after the workers attached, sampled together over 5 s (each in its own revision's run):",
    "",
    servicesTable(prev, cur),
    "",
    ...costLines(prev, cur),
  ].join("\n");
}
