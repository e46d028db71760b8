import { stringify } from "yaml";
import { usageError } from "./errors.ts";

/**
 * How results are printed: `-o table` (aligned columns for people), `json` and `yaml` (the
 * API's objects as they are, for scripts). Colours only on a terminal and never with NO_COLOR.
 */

export const FORMATS = ["table", "json", "yaml"] as const;
export type Format = (typeof FORMATS)[number];

export function parseFormat(value: string): Format {
  if ((FORMATS as readonly string[]).includes(value)) return value as Format;
  throw usageError(`-o ${value}: must be one of ${FORMATS.join(", ")}`);
}

export interface Out {
  /** Writes to stdout. */
  print(text: string): void;
  /** Writes to stderr: progress and notes that must not end up in a script's data. */
  note(text: string): void;
  colour: Colours;
  /** Whether stderr is a terminal (the progress display redraws there). */
  tty: boolean;
  /** The terminal's width (stderr's), for lines that must not wrap. */
  columns(): number;
}

export interface Colours {
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  dim(text: string): string;
  bold(text: string): string;
}

const ansi = (code: number) => (text: string) => `\x1b[${code}m${text}\x1b[0m`;
const plain = (text: string) => text;

export function colours(on: boolean): Colours {
  return on
    ? { green: ansi(32), red: ansi(31), yellow: ansi(33), dim: ansi(2), bold: ansi(1) }
    : { green: plain, red: plain, yellow: plain, dim: plain, bold: plain };
}

/** Colours a status word by what it means. */
export function statusColour(c: Colours, status: string): string {
  if (["ok", "success", "succeeded", "running", "true"].includes(status)) return c.green(status);
  if (["failed", "error", "false"].includes(status) || status.endsWith("_failed")) return c.red(status);
  if (status === "" || status === "-") return status;
  return c.yellow(status);
}

export interface Column<T> {
  header: string;
  value(row: T): string;
  /** A status column is coloured by meaning. */
  status?: boolean;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes are what is stripped.
const visibleLength = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "").length;

export function table<T>(rows: readonly T[], columns: readonly Column<T>[], c: Colours): string {
  const cells = rows.map((row) => columns.map((col) => col.value(row) || "-"));
  const widths = columns.map((col, i) => Math.max(col.header.length, ...cells.map((r) => visibleLength(r[i] ?? ""))));
  const line = (values: string[], colour: (i: number, v: string) => string) =>
    values
      .map((v, i) => {
        const shown = colour(i, v);
        return i === values.length - 1 ? shown : shown + " ".repeat((widths[i] ?? 0) - visibleLength(v));
      })
      .join("   ")
      .trimEnd();
  const head = line(
    columns.map((col) => col.header),
    (_i, v) => c.bold(v),
  );
  const body = cells.map((r) => line(r, (i, v) => (columns[i]?.status ? statusColour(c, v) : v)));
  return [head, ...body].join("\n");
}

/** Prints data in the chosen format; `table` uses the columns. */
export function render<T>(out: Out, format: Format, data: T | readonly T[], columns: readonly Column<T>[]): void {
  const rows = Array.isArray(data) ? (data as readonly T[]) : [data as T];
  if (format === "json") out.print(JSON.stringify(data, null, 2));
  else if (format === "yaml") out.print(stringify(data).trimEnd());
  else if (rows.length === 0) out.note("No resources found.");
  else out.print(table(rows, columns, out.colour));
}

/** `1m05s`, `4.2s`: elapsed time for people. */
export function elapsed(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}h${String(m).padStart(2, "0")}m${rest}s` : `${m}m${rest}s`;
}
