/**
 * `pnpm settings:readme`: writes the README's settings tables from the binaries' settings
 * schemas. test/repo/settings-readme.test.ts fails when the README differs, so the tables
 * cannot drift from what the binaries read.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AgentSettingsSchema } from "../packages/agent/src/settings.ts";
import { CliSettingsSchema } from "../packages/cli/src/settings.ts";
import { ServerSettingsSchema } from "../packages/control-plane/src/settings.ts";
import { settingsTable } from "../packages/settings/src/index.ts";

export const README = join(import.meta.dirname, "..", "README.md");

const SECTIONS: Record<string, Parameters<typeof settingsTable>[0]> = {
  "keelson-server": ServerSettingsSchema,
  "keelson-agent": AgentSettingsSchema,
  keelson: CliSettingsSchema,
};

/** The README with every `<!-- settings:NAME -->` … `<!-- /settings:NAME -->` block regenerated. */
export function renderReadme(text: string): string {
  let out = text;
  for (const [name, schema] of Object.entries(SECTIONS)) {
    const open = `<!-- settings:${name} -->`;
    const close = `<!-- /settings:${name} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf(close);
    if (start === -1 || end < start) throw new Error(`README.md has no ${open} … ${close} block`);
    out = `${out.slice(0, start + open.length)}\n${settingsTable(schema)}\n${out.slice(end)}`;
  }
  return out;
}

if (process.argv[1] === import.meta.filename) {
  const before = readFileSync(README, "utf8");
  const after = renderReadme(before);
  writeFileSync(README, after);
  process.stdout.write(
    before === after ? "README.md settings tables are up to date\n" : "README.md settings tables rewritten\n",
  );
}
