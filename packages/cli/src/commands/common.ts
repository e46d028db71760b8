import { readFileSync } from "node:fs";
import { type Command, Option } from "commander";
import { parse } from "yaml";
import { usageError } from "../errors.ts";
import { FORMATS, type Format, parseFormat } from "../output.ts";
import type { Cli } from "../session.ts";

/** Options and helpers several commands share. */

/** Commands whose `--config <file>` is their own input, not the CLI's settings file (see program.ts, run). */
const OWN_CONFIG = new Set<string>();

/** Declares `--config <file>` as `command`'s own (its help shows it; run hands the value over). */
export function ownConfigOption(command: Command, description: string): Command {
  OWN_CONFIG.add(command.name());
  return command.option("--config <file>", description);
}

export function ownsConfig(command: Command): boolean {
  return OWN_CONFIG.has(command.name());
}

export function outputOption(command: Command): Command {
  return command.addOption(new Option("-o, --output <format>", "output format").choices([...FORMATS]).default("table"));
}

export function formatOf(options: { output?: string }): Format {
  return parseFormat(options.output ?? "table");
}

export function waitOption(command: Command): Command {
  return command.option("--no-wait", "print the operation id and return at once instead of following it");
}

export function examples(command: Command, ...lines: string[]): Command {
  return command.addHelpText("after", `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}`);
}

/** A YAML or JSON spec file (`-` for stdin) that must be a map. */
export async function readSpec(cli: Cli, file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = file === "-" ? await cli.io.readStdin() : readFileSync(file, "utf8");
  } catch (error) {
    throw usageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    throw usageError(`${file} is not YAML or JSON: ${(error as Error).message}`);
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw usageError(`${file} must hold a map of fields`);
  return doc as Record<string, unknown>;
}

/**
 * `--set key=value` pairs into a body: the value is read as YAML (`3` a number, `true` a
 * boolean, `"3"` text) and dots make nested maps (`etcdBackup.intervalInMins=30`).
 */
export function setPairs(pairs: readonly string[], into: Record<string, unknown> = {}): Record<string, unknown> {
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw usageError(`--set ${pair}: must be key=value`);
    const path = pair.slice(0, eq).split(".");
    let value: unknown;
    try {
      value = parse(pair.slice(eq + 1));
    } catch {
      value = pair.slice(eq + 1);
    }
    let at = into;
    for (const key of path.slice(0, -1)) {
      const next = at[key];
      at[key] = next && typeof next === "object" && !Array.isArray(next) ? next : {};
      at = at[key] as Record<string, unknown>;
    }
    at[path.at(-1) as string] = value ?? "";
  }
  return into;
}

export const collect = (value: string, previous: string[] = []) => [...previous, value];
