import type { Command } from "commander";
import { type Column, elapsed, render } from "../output.ts";
import type { Wrap } from "../program.ts";
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
}

/** How long ago `at` was, by this machine's clock (a heartbeat's age; `-` when in the future). */
const ago = (at: string, now: number) => {
  const ms = now - Date.parse(at);
  return ms >= 0 ? `${elapsed(ms)} ago` : "-";
};

function columns(now: number): Column<ReplicaRecord>[] {
  return [
    { header: "ID", value: (r) => r.id },
    { header: "URL", value: (r) => r.url },
    { header: "VERSION", value: (r) => r.version },
    { header: "STATUS", value: (r) => (r.live ? "live" : "gone"), status: true },
    { header: "HEARTBEAT", value: (r) => ago(r.lastHeartbeat, now) },
    { header: "STARTED", value: (r) => r.startedAt },
    { header: "AGENTS", value: (r) => String(r.agentsHeld) },
    { header: "OPERATIONS", value: (r) => String(r.operationsOwned) },
  ];
}

export function replicaCommands(program: Command, wrap: Wrap): void {
  examples(
    outputOption(
      program
        .command("replicas")
        .description(
          "List the control-plane replicas on this database: URL, version, live or gone, last heartbeat, agent links held, operations owned (admin token)",
        ),
    ),
    "keelson replicas",
    "keelson replicas -o json",
  ).action(
    wrap(async (cli, options) => {
      const s = await cli.session();
      const list = await s.api.get<ReplicaRecord[]>("/v1/replicas");
      render(cli.out, formatOf(options as { output: string }), list, columns(Date.now()));
    }),
  );
}
