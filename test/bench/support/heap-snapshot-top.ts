// Reads a V8 heap snapshot (node --heapsnapshot-signal, v8.writeHeapSnapshot) and prints what
// the heap holds by kind: object count and self size per (node type, constructor or name).
// With a second snapshot and a count of items each holds beyond the first (agents linked),
// prints the difference per item: what each agent costs.
//   node --import tsx test/bench/support/heap-snapshot-top.ts <a.heapsnapshot> [<b.heapsnapshot> <items>] [--top N]
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; location_fields?: string[] } };
  nodes: number[];
  strings: string[];
  /** Where each closure's function is (object_index, script_id, line, column): anonymous ones are told apart by it. */
  locations?: number[];
}

type Tally = Map<string, { count: number; bytes: number }>;

function tally(file: string): { byKind: Tally; total: number } {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const byKind: Tally = new Map();
  let total = 0;
  // An anonymous closure is named by its script and line (0-based, as V8 counts them).
  const where = new Map<number, string>();
  const loc = s.snapshot.meta.location_fields ?? [];
  for (let i = 0; s.locations && i < s.locations.length; i += loc.length)
    where.set(s.locations[i] as number, `@${s.locations[i + 1]}:${(s.locations[i + 2] as number) + 1}`);
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt] as number] as string;
    // Strings and code are told apart by type only: their names are their contents.
    const name = ["string", "concatenated string", "sliced string", "code", "number"].includes(type)
      ? ""
      : (s.strings[s.nodes[i + nameAt] as number] ?? "").slice(0, 60);
    const key = `${type} ${name}${type === "closure" ? (where.get(i) ?? "") : ""}`.trim();
    const bytes = s.nodes[i + sizeAt] as number;
    const t = byKind.get(key) ?? { count: 0, bytes: 0 };
    t.count++;
    t.bytes += bytes;
    byKind.set(key, t);
    total += bytes;
  }
  return { byKind, total };
}

const args = process.argv.slice(2);
const topAt = args.indexOf("--top");
const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 30;
const [first, second, items] = args;
if (!first) throw new Error("usage: heap-snapshot-top.ts <a.heapsnapshot> [<b.heapsnapshot> <items>] [--top N]");
const a = tally(first);
const kib = (b: number) => (b / 1024).toFixed(1).padStart(10);
if (!second) {
  process.stdout.write(`heap ${kib(a.total)} KiB\n\n     KiB   |   count | kind\n`);
  for (const [kind, t] of [...a.byKind].sort((x, y) => y[1].bytes - x[1].bytes).slice(0, top))
    process.stdout.write(`${kib(t.bytes)} | ${String(t.count).padStart(7)} | ${kind}\n`);
} else {
  const b = tally(second);
  const n = Number(items);
  if (!(n > 0)) throw new Error("the item count must be a positive number");
  process.stdout.write(
    `heap ${kib(a.total)} -> ${kib(b.total)} KiB: ${((b.total - a.total) / n).toFixed(0)} bytes per item over ${n}\n\n` +
      "bytes/item | objects/item | kind\n",
  );
  const kinds = new Set([...a.byKind.keys(), ...b.byKind.keys()]);
  const diff = [...kinds].map((kind) => {
    const x = a.byKind.get(kind) ?? { count: 0, bytes: 0 };
    const y = b.byKind.get(kind) ?? { count: 0, bytes: 0 };
    return { kind, bytes: (y.bytes - x.bytes) / n, count: (y.count - x.count) / n };
  });
  for (const d of diff.sort((x, y) => Math.abs(y.bytes) - Math.abs(x.bytes)).slice(0, top))
    process.stdout.write(`${d.bytes.toFixed(1).padStart(10)} | ${d.count.toFixed(2).padStart(12)} | ${d.kind}\n`);
}
