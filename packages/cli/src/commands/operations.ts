import type { Command } from "commander";
import { usageError } from "../errors.ts";
import { findOperation, listOperations, watchOperation } from "../follow.ts";
import { type Column, elapsed, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import type { Operation } from "../progress.ts";
import { findCluster } from "../resolve.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/** `keelson operations list|get|watch`: what the control plane is doing or did. */

const took = (op: Operation) =>
  op.startedAt ? elapsed((op.finishedAt ? Date.parse(op.finishedAt) : Date.now()) - Date.parse(op.startedAt)) : "";

const COLUMNS: Column<Operation>[] = [
  { header: "UUID", value: (o) => o.uuid },
  { header: "KIND", value: (o) => o.kind },
  { header: "TARGET", value: (o) => o.targetUuid },
  { header: "STATE", value: (o) => o.state, status: true },
  { header: "CREATED", value: (o) => o.createdAt },
  { header: "TOOK", value: took },
  { header: "ERROR", value: (o) => (o.error ?? "").split("\n")[0] ?? "" },
];

const STATES = ["pending", "running", "succeeded", "failed"];

export function operationCommands(program: Command, wrap: Wrap): void {
  const operations = program.command("operations").alias("ops").description("The project's operations");

  examples(
    outputOption(
      operations
        .command("list")
        .alias("ls")
        .description("List operations, newest first")
        .option("--cluster <cluster>", "only those on this cluster (name or uuid)")
        .option("--state <state>", `only those in this state (${STATES.join(", ")})`)
        .option("--limit <n>", "at most this many (1-1000)", (v) => Number.parseInt(v, 10), 20),
    ),
    "keelson operations list --cluster demo",
    "keelson operations list --state failed -o json",
  ).action(
    wrap(async (cli, options) => {
      const o = options as { output: string; cluster?: string; state?: string; limit: number };
      if (o.state && !STATES.includes(o.state))
        throw usageError(`--state ${o.state}: must be one of ${STATES.join(", ")}`);
      if (!Number.isInteger(o.limit) || o.limit < 1 || o.limit > 1000)
        throw usageError("--limit must be from 1 to 1000");
      const s = await cli.session();
      const target = o.cluster ? (await findCluster(s, o.cluster)).uuid : undefined;
      const list = await listOperations(s, {
        limit: o.limit,
        ...(target ? { target } : {}),
        ...(o.state ? { state: o.state } : {}),
      });
      render(cli.out, formatOf(o), list, COLUMNS);
    }),
  );

  examples(
    outputOption(
      operations.command("get").argument("<operation>", "uuid or a unique prefix").description("Show one operation"),
    ),
    "keelson operations get 3f2c",
  ).action(
    wrap(async (cli, ref, options) => {
      const s = await cli.session();
      render(cli.out, formatOf(options as { output: string }), await findOperation(s, ref as string), COLUMNS);
    }),
  );

  examples(
    operations
      .command("watch")
      .argument("<operation>", "uuid or a unique prefix")
      .description("Follow an operation to its end with live progress (Ctrl-C stops watching, not the operation)"),
    "keelson operations watch 3f2c",
  ).action(
    wrap(async (cli, ref) => {
      await watchOperation(cli, await cli.session(), ref as string);
    }),
  );
}
