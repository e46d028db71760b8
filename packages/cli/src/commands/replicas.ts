import type { Command } from "commander";
import { CliError, usageError } from "../errors.ts";
import { type Column, elapsed, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import type { Session } from "../session.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/** `keelson replicas`: the control-plane replicas sharing the database (GET /v1/replicas, admin). */

interface ReplicaRecord {
  id: string;
  url: string;
  version: string;
  startedAt: string;
  lastHeartbeat: string;
  live: boolean;
  agentsHeld: number;
  operationsOwned: number;
  draining: boolean;
  drainingSince: string | null;
  /** The replica that answered the listing (the one this tool's URL reaches). */
  self: boolean;
}

/** How long ago `at` was, by this machine's clock (a heartbeat's age; `-` when in the future). */
const ago = (at: string, now: number) => {
  const ms = now - Date.parse(at);
  return ms >= 0 ? `${elapsed(ms)} ago` : "-";
};

function columns(now: number): Column<ReplicaRecord>[] {
  return [
    // kubectl's config get-contexts marks the current one the same way.
    { header: "CURRENT", value: (r) => (r.self ? "*" : "-") },
    { header: "ID", value: (r) => r.id },
    { header: "URL", value: (r) => r.url },
    { header: "VERSION", value: (r) => r.version },
    { header: "STATUS", value: (r) => (!r.live ? "gone" : r.draining ? "draining" : "live"), status: true },
    { header: "HEARTBEAT", value: (r) => ago(r.lastHeartbeat, now) },
    { header: "STARTED", value: (r) => r.startedAt },
    { header: "AGENTS", value: (r) => String(r.agentsHeld) },
    { header: "OPERATIONS", value: (r) => String(r.operationsOwned) },
  ];
}

export function replicaCommands(program: Command, wrap: Wrap): void {
  const replicas = examples(
    outputOption(
      program
        .command("replicas")
        .description(
          "List the control-plane replicas on this database (* marks the one that answered): URL, version, live or gone, last heartbeat, agent links held, operations owned (admin token)",
        ),
    ),
    "keelson replicas",
    "keelson replicas -o json",
    "keelson replicas drain cp-2",
  );
  replicas.action(
    wrap(async (cli, options) => {
      const s = await cli.session();
      const list = await s.api.get<ReplicaRecord[]>("/v1/replicas");
      render(cli.out, formatOf(options as { output: string }), list, columns(Date.now()));
    }),
  );
  drainCommand(replicas, wrap);
}

/** How often the drain's wait reads GET /v1/replicas. */
const POLL_MS = 1_000;

/** What is left on a draining replica, as its row says; undefined once it holds nothing. */
function left(r: ReplicaRecord | undefined): string | undefined {
  // No row: the replica stopped gracefully (its row goes). Gone: it holds no link, and its
  // operations are taken over when their leases run out (counted until then).
  if (!r) return undefined;
  const agents = r.live ? r.agentsHeld : 0;
  // Its agents count is as of its last heartbeat: one from before the drain says nothing yet.
  const stale = r.live && r.drainingSince !== null && Date.parse(r.lastHeartbeat) < Date.parse(r.drainingSince);
  if (!stale && agents === 0 && r.operationsOwned === 0) return undefined;
  return `${r.operationsOwned} operation${r.operationsOwned === 1 ? "" : "s"}, ${stale ? "?" : agents} agent link${agents === 1 ? "" : "s"}`;
}

async function waitDrained(s: Session, id: string, timeoutS: number, note: (text: string) => void): Promise<void> {
  const until = Date.now() + timeoutS * 1000;
  let said = "";
  for (;;) {
    const row = (await s.api.get<ReplicaRecord[]>("/v1/replicas")).find((r) => r.id === id);
    const rest = left(row);
    if (rest === undefined) return;
    if (rest !== said) note(`${id}: still holds ${rest}`);
    said = rest;
    if (Date.now() >= until) {
      throw new CliError(`${id} still holds ${rest} after ${timeoutS} s; it goes on draining (see keelson replicas)`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function drainCommand(replicas: Command, wrap: Wrap): void {
  examples(
    replicas
      .command("drain")
      .argument("<id>", "the replica's id (KEELSON_REPLICA_ID, as `keelson replicas` lists it)")
      .description(
        "Empty a replica for maintenance: it claims no operation (those it holds go to another replica) and its agents move to another replica; waits until it holds none (admin token). Its restart ends the drain.",
      )
      .option("--no-wait", "return once the replica is marked draining")
      .option("--timeout <seconds>", "how long to wait for it to hold nothing (1-3600)", (v) => Number(v), 120),
    "keelson replicas drain cp-2",
    "keelson replicas drain cp-2 --no-wait",
  ).action(
    wrap(async (cli, id, options) => {
      const o = options as { wait: boolean; timeout: number };
      if (!Number.isInteger(o.timeout) || o.timeout < 1 || o.timeout > 3600)
        throw usageError("--timeout must be a whole number of seconds from 1 to 3600");
      const s = await cli.session();
      const ref = encodeURIComponent(id as string);
      const marked = await s.api.json<ReplicaRecord>("POST", `/v1/replicas/${ref}/drain`);
      cli.out.note(`${marked.id}: draining (${marked.operationsOwned} operations, ${marked.agentsHeld} agent links)`);
      if (!o.wait) return;
      await waitDrained(s, marked.id, o.timeout, (text) => cli.out.note(text));
      cli.out.print(`${marked.id}: drained, it holds no operation and no agent link`);
    }),
  );
}
