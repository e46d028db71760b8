import autocannon from "autocannon";

export interface LoadResult {
  label: string;
  requestsPerSec: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

/** Drives one URL with autocannon for a fixed time and returns throughput and latency. */
export async function load(
  label: string,
  url: string,
  options: { headers?: Record<string, string>; connections?: number; durationSec?: number } = {},
): Promise<LoadResult> {
  const result = await autocannon({
    url,
    headers: options.headers ?? {},
    connections: options.connections ?? 10,
    duration: options.durationSec ?? 10,
  });
  return {
    label,
    requestsPerSec: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}

export function printTable(rows: LoadResult[]): void {
  const header = ["case", "req/s", "p50 ms", "p99 ms", "errors", "non-2xx"];
  const lines = rows.map((r) => [
    r.label,
    r.requestsPerSec.toFixed(0),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    String(r.errors),
    String(r.non2xx),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ");
  process.stdout.write(`${fmt(header)}\n${fmt(widths.map((w) => "-".repeat(w)))}\n`);
  for (const l of lines) process.stdout.write(`${fmt(l)}\n`);
}
