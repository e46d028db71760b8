import { spawn } from "node:child_process";
import { join } from "node:path";

/** Runs the real `keelson` binary as a child process, as a person or a script does. */

const BIN = join(import.meta.dirname, "..", "bin", "keelson.mjs");

/** The environment of a run against `url` as `token`, its config file and HOME under `dir` (none of the user's). */
export const cliEnv = (url: string, dir: string, token: string) => ({
  KEELSON_URL: url,
  KEELSON_TOKEN: token,
  KEELSON_CONFIG: join(dir, "c.yaml"),
  HOME: dir,
});

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function keelson(
  args: string[],
  options: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    // Only what the test gives: no KEELSON_* of the machine running the tests leaks in.
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`keelson ${args.join(" ")} did not end\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}
