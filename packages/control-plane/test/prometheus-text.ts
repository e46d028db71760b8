// @ts-expect-error parse-prometheus-text-format ships no types; its output is typed below.
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/**
 * Reading a scrape the way Prometheus stores it: one series per sample line.
 *
 * The families and their TYPE and HELP come from parse-prometheus-text-format (the most used
 * npm parser of the format, an implementation that is not ours), which also throws on any line
 * it cannot parse. Its prom2json-style output folds a histogram's samples into one object and
 * drops `_sum` and `_count` when the histogram has labels of its own, so sample values are read
 * per line here, with the label syntax of the exposition format (quoted values, `\\` `\"` `\n`).
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  families: Map<string, { type: string; help: string }>;
  samples: Sample[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const match = LABEL.exec(text);
    if (!match) throw new Error(`bad labels in: ${line}`);
    labels[match[1] as string] = (match[2] as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
  }
  return labels;
}

export function parseScrape(text: string): Scrape {
  const parsed = parsePrometheusTextFormat(text) as { name: string; type: string; help: string }[];
  const families = new Map(parsed.map((f) => [f.name, { type: f.type, help: f.help }]));
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    samples.push({ name: match[1] as string, labels: parseLabels(match[2] ?? "", line), value: Number(match[3]) });
  }
  return { families, samples };
}

/** The samples named `name` whose labels include `labels`. */
export function samples(scrape: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return scrape.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The value of the one sample named `name` with these labels (a counter, a gauge, a histogram's _count). */
export function sampleValue(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const found = samples(scrape, name, labels);
  if (found.length !== 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${found.length} samples`);
  return (found[0] as Sample).value;
}
