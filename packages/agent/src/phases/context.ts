import { accessSync, constants } from "node:fs";
import { basename, join } from "node:path";
import { execa } from "execa";
import type { Logger } from "pino";
import { childPath } from "../services/child-path.ts";
import type { ServiceManager } from "../services/types.ts";
import type { NodeConfig } from "./config.ts";
import type { KubeApi } from "./kube-api.ts";
import type { NodePaths } from "./paths.ts";
import {
  MissingBinaryError,
  type PhaseContext,
  PhaseError,
  type PhaseIntent,
  type RunOptions,
  type RunResult,
  type SignCsr,
} from "./types.ts";

export interface ContextParts {
  config: NodeConfig;
  paths: NodePaths;
  log: Logger;
  services: ServiceManager;
  signCsr: SignCsr;
  kubeApi: KubeApi;
  masterKubeApi: KubeApi;
}

export function buildContext(
  parts: ContextParts,
  call: { signal: AbortSignal; intent: PhaseIntent; regenerateCerts: boolean; log: Logger },
): PhaseContext {
  const { config } = parts;
  return {
    ...parts,
    ...call,
    binary: (name, options) => findBinary(config.nodePackage, name, options?.fallbackDirs ?? []),
    run: (command, args, options) => runCommand(command, args, call.signal, config.timeouts.commandMs, options),
  };
}

/** `<node package>/bin/<name>`, else the first fallback dir that has it executable. */
export function findBinary(nodePackage: string, name: string, fallbackDirs: string[] = []): string {
  const candidates = [join(nodePackage, "bin", name), ...fallbackDirs.map((dir) => join(dir, name))];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Try the next place.
    }
  }
  throw new MissingBinaryError(name, candidates);
}

async function runCommand(
  command: string,
  args: string[],
  signal: AbortSignal,
  defaultTimeoutMs: number,
  options: RunOptions = {},
): Promise<RunResult> {
  const result = await execa(command, args, {
    env: { PATH: childPath(), ...options.env },
    extendEnv: false,
    reject: false,
    timeout: options.timeoutMs ?? defaultTimeoutMs,
    cancelSignal: signal,
    ...(options.input !== undefined ? { input: options.input } : { stdin: "ignore" as const }),
  });
  const out: RunResult = {
    stdout: String(result.stdout ?? ""),
    stderr: String(result.stderr ?? ""),
    exitCode: result.exitCode ?? -1,
  };
  if (result.failed && !options.allowFailure) {
    const why = result.timedOut
      ? `timed out after ${options.timeoutMs ?? defaultTimeoutMs} ms`
      : result.isCanceled
        ? "cancelled"
        : result.exitCode === undefined
          ? result.shortMessage
          : `exit ${result.exitCode}`;
    const output = (out.stderr || out.stdout).trim().split("\n").slice(-6).join("\n");
    throw new PhaseError(`${basename(command)} ${args.join(" ")} failed (${why})${output ? `: ${output}` : ""}`);
  }
  return out;
}
