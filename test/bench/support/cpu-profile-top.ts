// Reads a V8 CPU profile (node --cpu-prof) and prints where the time went: self time per
// function, and inclusive time of the functions named on the command line, optionally within a
// window of the profile's clock (monotonic µs, as `pnpm bench agents` logs with BENCH_PROFILE_DIR).
//   node --import tsx test/bench/support/cpu-profile-top.ts <file.cpuprofile> [startUs endUs] [--top N]
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const topAt = args.indexOf("--top");
const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 30;
const [file, from, to] = args;
if (!file) throw new Error("usage: cpu-profile-top.ts <file.cpuprofile> [startUs endUs] [--top N]");
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const startUs = from ? Number(from) : Number.NEGATIVE_INFINITY;
const endUs = to ? Number(to) : Number.POSITIVE_INFINITY;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function label(n: ProfileNode): string {
  const f = n.callFrame;
  const where = f.url ? `${f.url.replace(/^.*\/(node_modules|packages|test)\//, "$1/")}:${f.lineNumber + 1}` : "";
  return `${f.functionName || "(anonymous)"} ${where}`.trim();
}

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
let t = profile.startTime;
let windowUs = 0;
let idleUs = 0;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] as number;
  const next = profile.timeDeltas[i + 1] ?? 0;
  if (t < startUs || t > endUs) continue;
  windowUs += next;
  const node = byId.get(profile.samples[i] as number) as ProfileNode;
  if (node.callFrame.functionName === "(idle)") {
    idleUs += next;
    continue;
  }
  self.set(label(node), (self.get(label(node)) ?? 0) + next);
  // Each function once per sample, however deep it recurses.
  const seen = new Set<string>();
  for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
    const l = label(byId.get(id) as ProfileNode);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + next);
  }
}

const busyUs = windowUs - idleUs;
const ms = (us: number) => (us / 1000).toFixed(1).padStart(9);
process.stdout.write(
  `window ${ms(windowUs)} ms, busy ${ms(busyUs)} ms (${((busyUs / windowUs) * 100).toFixed(2)}% of one core on the main thread)\n\n`,
);
process.stdout.write("self ms   | function\n");
for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
  process.stdout.write(`${ms(us)} | ${name}\n`);
process.stdout.write("\ninclusive ms | function\n");
for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
  process.stdout.write(`${ms(us)}    | ${name}\n`);
