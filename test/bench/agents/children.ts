import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..", "..");

/**
 * Spawns `node <args>` through a shell that first raises the open-files limit to the hard
 * limit: each side of 10,000 links needs 10,000 descriptors. `exec` keeps the pid (and the
 * IPC channel) of the node process itself, so /proc/<pid> measures node, not the shell.
 */
export function spawnNode(
  args: string[],
  env: Record<string, string>,
  options: { ipc?: boolean; quiet?: boolean } = {},
): ChildProcess {
  return spawn("bash", ["-c", 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec node "$@"', "bash", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", options.quiet ? "ignore" : "inherit", "inherit", ...(options.ipc ? (["ipc"] as const) : [])],
  });
}

/** Sends a message to a worker and waits for its answer of the given type. */
export function ask<T>(child: ChildProcess, message: object, answerType: string, timeoutMs = 900_000): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no ${answerType} from the worker within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onMessage = (m: { type: string; error?: string }) => {
      if (m.type === "error") {
        cleanup();
        reject(new Error(m.error));
      } else if (m.type === answerType) {
        cleanup();
        resolvePromise(m as T);
      }
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`worker exited (${code}) before answering ${answerType}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    child.on("message", onMessage);
    child.once("exit", onExit);
    child.send(message);
  });
}

export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once("exit", () => r()));
}

/** The first message of `type` from a child (a server saying it listens). */
export function waitMessage<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    child.on("message", (m: { type: string }) => {
      if (m.type === type) resolve(m as T);
    });
    child.once("exit", (code) => reject(new Error(`child exited (${code}) before ${type}`)));
  });
}

/** Stops a child with `signal`, SIGKILL after 20 s. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited(child);
  clearTimeout(timer);
}
