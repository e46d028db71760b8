import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../e2e/support/processes.ts";

/**
 * A previous revision of this repository checked out beside it, for benches that run the last
 * release's binaries against this tree's in the same run: a detached git worktree in a temporary
 * directory with its dependencies installed offline from the pnpm store.
 */
export interface RevisionTree {
  /** The revision as asked for (e.g. `d7de37b`) and the commit it names. */
  rev: string;
  commit: string;
  /** The worktree's root: its `npx keelson-server` and test/fixtures/node-package. */
  root: string;
  /** Removes the worktree and its directory (safe to call twice). */
  remove(): void;
}

function git(args: string[], cwd = REPO_ROOT): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

/**
 * The revision to compare with: BENCH_PREVIOUS, else the newest tag reachable from HEAD (a
 * release); `undefined` with the reason when neither exists (this repository tags no releases).
 */
export function previousRevisionSetting(): { rev: string; source: string } | { reason: string } {
  const asked = process.env.BENCH_PREVIOUS?.trim();
  if (asked) return { rev: asked, source: "BENCH_PREVIOUS" };
  try {
    return { rev: git(["describe", "--tags", "--abbrev=0", "HEAD"]), source: "newest tag" };
  } catch {
    return {
      reason: "no git tag marks a release here: set BENCH_PREVIOUS=<git rev> to measure it beside this tree",
    };
  }
}

/** This tree's revision as `git describe` names it (`-dirty` with uncommitted changes). */
export function currentRevision(): string {
  return git(["describe", "--always", "--dirty"]);
}

/** `git worktree add --detach` of `rev` into a temporary directory, then `pnpm install --offline`. */
export function checkoutRevision(rev: string, log: (line: string) => void): RevisionTree {
  let commit: string;
  try {
    commit = git(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]);
  } catch {
    throw new Error(`BENCH_PREVIOUS=${rev}: not a commit of this repository (git rev-parse)`);
  }
  const parent = mkdtempSync(join(tmpdir(), "keelson-bench-prev-"));
  const root = join(parent, "repo");
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    try {
      git(["worktree", "remove", "--force", root]);
    } catch {
      // never added, or its directory already gone: prune drops the stale record
      git(["worktree", "prune"]);
    }
    rmSync(parent, { recursive: true, force: true });
  };
  // Ctrl-C or a kill ends the bench without its finally blocks: leave no worktree behind.
  const onSignal = (signal: NodeJS.Signals) => {
    remove();
    process.kill(process.pid, signal);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    log(`checking out ${rev} (${commit.slice(0, 12)}) into ${root}...`);
    git(["worktree", "add", "--detach", root, commit]);
    execFileSync("pnpm", ["install", "--offline", "--frozen-lockfile"], {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"],
    });
  } catch (err) {
    remove();
    throw err;
  }
  return { rev, commit, root, remove };
}
