import type { Command } from "commander";
import { usageError } from "../errors.ts";
import { type Column, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import type { Session } from "../session.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/**
 * `keelson audit`: the audit trail (GET /v1/audit: every change, login and credential issued),
 * oldest first within a window that defaults to the last day, as a table for a person, JSON or
 * YAML for a script, or the API's JSON lines export for a log shipper (`--jsonl`, streamed).
 */

interface AuditRecord {
  id: string;
  at: string;
  actor: "admin" | "token" | "session" | "anonymous";
  userId: string | null;
  tokenId: string | null;
  projectId: string | null;
  source: string;
  method: string;
  route: string;
  target: string | null;
  status: number | null;
  operationId: string | null;
  credential: string | null;
}

interface AuditPage {
  records: AuditRecord[];
  nextCursor: string | null;
}

const who = (r: AuditRecord) =>
  r.actor === "session" ? `user ${r.userId ?? "?"}` : r.actor === "token" ? `token ${r.tokenId ?? "?"}` : r.actor;

const COLUMNS: Column<AuditRecord>[] = [
  { header: "AT", value: (r) => r.at },
  { header: "WHO", value: who },
  { header: "PROJECT", value: (r) => r.projectId ?? "" },
  { header: "SOURCE", value: (r) => r.source },
  { header: "REQUEST", value: (r) => `${r.method} ${r.route}` },
  { header: "TARGET", value: (r) => r.target ?? "" },
  // null: the change committed but its answer was never recorded (the server stopped).
  { header: "STATUS", value: (r) => (r.status === null ? "?" : String(r.status)) },
  { header: "ISSUED", value: (r) => r.credential ?? "" },
  { header: "OPERATION", value: (r) => r.operationId ?? "" },
];

/** The API's page size limit (GET /v1/audit `limit`). */
const PAGE = 1000;
const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--since`/`--until`: an ISO-8601 time, or an age such as `90s`, `30m`, `6h`, `7d` (that long ago). */
export function auditTime(flag: string, value: string, now = Date.now()): string {
  const age = /^(\d{1,6})([smhd])$/.exec(value);
  if (age) return new Date(now - Number(age[1]) * (UNITS[age[2] as string] as number)).toISOString();
  if (/^\d{4}-\d{2}-\d{2}/.test(value) && !Number.isNaN(Date.parse(value))) return new Date(value).toISOString();
  throw usageError(`${flag} ${value}: must be an ISO-8601 time (2026-11-26T08:00:00Z) or an age such as 30m, 6h, 7d`);
}

interface AuditOptions {
  output: string;
  since: string;
  until?: string;
  user?: string;
  target?: string;
  limit: number;
  jsonl?: boolean;
}

/** The API's filter; bad times are usage errors, refused before the session asks anything. */
function windowOf(o: AuditOptions) {
  return {
    since: auditTime("--since", o.since),
    until: o.until === undefined ? undefined : auditTime("--until", o.until),
    user: o.user,
    target: o.target,
  };
}

type AuditFilter = ReturnType<typeof windowOf> & { project: string | undefined };

/** Up to `limit` records, page by page; `more` when the window holds more than that. */
async function readRecords(
  s: Session,
  filter: AuditFilter,
  limit: number,
): Promise<{ records: AuditRecord[]; more: boolean }> {
  const records: AuditRecord[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await s.api.get<AuditPage>("/v1/audit", {
      ...filter,
      limit: Math.min(PAGE, limit - records.length),
      cursor,
    });
    records.push(...page.records);
    if (!page.nextCursor) return { records, more: false };
    if (records.length >= limit) return { records, more: true };
    cursor = page.nextCursor;
  }
}

/** The API's JSON lines export, line by line to stdout as it arrives. */
async function streamLines(s: Session, filter: AuditFilter, print: (line: string) => void) {
  const res = await s.api.send("GET", "/v1/audit", { query: { ...filter, format: "jsonl" }, stream: true });
  const decoder = new TextDecoder();
  let rest = "";
  try {
    for await (const chunk of res.body) {
      const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) if (line) print(line);
    }
  } finally {
    res.body.destroy();
  }
  if (rest) print(rest);
}

export function auditCommands(program: Command, wrap: Wrap): void {
  examples(
    outputOption(
      program
        .command("audit")
        .description(
          "The audit trail, oldest first: every change, login and credential issued, with who, from where and the outcome (admin token: every project, or the one --project names; a project admin: its own)",
        )
        .option("--since <time>", "from this time: ISO-8601, or an age such as 30m, 6h, 7d", "24h")
        .option("--until <time>", "up to this time: ISO-8601, or an age")
        .option("--user <id>", "only this user's requests")
        .option("--target <id>", "only records that acted on this id (a cluster, node, token...)")
        .option("--limit <n>", "at most this many records (1-100000)", (v) => Number(v), 1000)
        .option("--jsonl", "every selected record as JSON lines, streamed (for a log shipper; ignores --limit)"),
    ),
    "keelson audit --since 6h",
    "keelson audit --target 3f2c8a10-... -o json",
    "keelson audit --since 2026-11-01T00:00:00Z --jsonl > audit.jsonl",
  ).action(
    wrap(async (cli, options) => {
      const o = options as AuditOptions;
      if (!Number.isInteger(o.limit) || o.limit < 1 || o.limit > 100_000)
        throw usageError("--limit must be a whole number from 1 to 100000");
      const window = windowOf(o);
      const s = await cli.session();
      // Every project's records unless one is named (the global --project or KEELSON_PROJECT);
      // a project token sees its own project's only, whatever it asks.
      const filter = { ...window, project: cli.settings.project === undefined ? undefined : s.projectId };
      if (o.jsonl) return streamLines(s, filter, (line) => cli.out.print(line));
      const { records, more } = await readRecords(s, filter, o.limit);
      render(cli.out, formatOf(o), records, COLUMNS);
      if (more)
        cli.out.note(
          `showing the first ${records.length} records of the window; narrow it (--since, --until, --target) or raise --limit`,
        );
    }),
  );
}
