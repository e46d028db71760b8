import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CommandResult, runNode } from "../../../packages/cli/src/release/server.ts";
import { writeSums } from "../../../scripts/pack-release.ts";
import { REPO_ROOT } from "./processes.ts";

/**
 * Releases for the upgrade tests: another release made from a packed one (as a later version
 * of the workspace would be), with its version changed everywhere a release carries it and,
 * optionally, one more migration for each dialect (as `pnpm db:generate` would add to both),
 * then its SHA256SUMS written again.
 */
export function deriveRelease(
  from: string,
  outDir: string,
  version: string,
  migration?: { name: string; sqlite: string; postgres: string },
): string {
  const dir = join(outDir, `keelson-${version}`);
  // Hard links: a release is 100 MB and B changes a handful of files, each unlinked before it is
  // written (writing through a link would change A too).
  execFileSync("cp", ["-al", from, dir]);
  const rewrite = (file: string, change: (json: Record<string, unknown>) => void) => {
    const json = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
    change(json);
    rmSync(file);
    writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  };
  for (const p of ["control-plane", "db", "protocol", "settings", "cli"])
    rewrite(join(dir, "packages", p, "package.json"), (j) => {
      j.version = version;
    });
  rewrite(join(dir, "manifest.json"), (j) => {
    j.version = version;
    if (!migration) return;
    const schema = j.schemaVersion as { sqlite: number; postgres: number };
    schema.sqlite += 1;
    schema.postgres += 1;
  });
  if (migration) {
    for (const [folder, sql] of [
      ["drizzle", migration.sqlite],
      ["drizzle-pg", migration.postgres],
    ] as const) {
      const drizzle = join(dir, "packages", "db", folder);
      rewrite(join(drizzle, "meta", "_journal.json"), (j) => {
        const entries = j.entries as { idx: number; when: number }[];
        const last = entries.at(-1) as { idx: number; when: number };
        const tag = `${String(last.idx + 1).padStart(4, "0")}_${migration.name}`;
        writeFileSync(join(drizzle, `${tag}.sql`), sql);
        entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag } as never);
      });
    }
  }
  rmSync(join(dir, "SHA256SUMS"));
  writeSums(dir);
  return dir;
}

/** `keelson <args>` from the workspace, to its end (the commands under test start their own processes). */
export function keelson(args: string[], timeoutMs = 240_000): Promise<CommandResult> {
  return runNode([join(REPO_ROOT, "packages", "cli", "bin", "keelson.mjs"), ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root" },
    cwd: REPO_ROOT,
    timeoutMs,
  });
}

/** Stops an install under `root` (`keelson stop`), then kills what is left of its supervisor and server. */
export async function stopInstalled(root: string): Promise<void> {
  const stop = await keelson(["stop", "--root", root], 60_000);
  if (stop.code !== 0) process.stderr.write(`keelson stop: ${stop.code} ${stop.stderr}` + "\n");
  const state = join(root, "run", "keelson", "supervisor.json");
  if (!existsSync(state)) return;
  const s = JSON.parse(readFileSync(state, "utf8")) as { supervisorPid: number; serverPid: number | null };
  for (const pid of [s.supervisorPid, s.serverPid]) {
    try {
      if (pid) process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
