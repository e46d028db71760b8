import http from "node:http";
import https from "node:https";
import { execa } from "execa";
import { readBody } from "../read-body.ts";
import type { HealthProbe, HttpProbe } from "./types.ts";

export interface ProbeResult {
  ok: boolean;
  detail: string;
}

/** Runs a health probe; never throws (a probe that cannot run has failed). */
export async function runProbe(probe: HealthProbe, signal?: AbortSignal): Promise<ProbeResult> {
  try {
    if (probe.kind === "http") {
      const { status, body } = await httpGet(probe, signal);
      if (status >= 200 && status < 300) return { ok: true, detail: `${probe.url}: ${status}` };
      return { ok: false, detail: `${probe.url} answered ${status}: ${body.slice(0, 300)}` };
    }
    const result = await execa(probe.command, probe.args, {
      env: probe.env ?? {},
      extendEnv: false,
      reject: false,
      timeout: probe.timeoutMs ?? 5000,
      cancelSignal: signal,
      stdin: "ignore",
    });
    if (result.exitCode === 0) return { ok: true, detail: `${probe.command} exited 0` };
    const output = `${result.stderr || ""}${result.stdout || ""}`.trim().slice(0, 500);
    return { ok: false, detail: `${probe.command} ${probe.args.join(" ")} failed (${result.shortMessage}): ${output}` };
  } catch (err) {
    const target = probe.kind === "http" ? probe.url : probe.command;
    return { ok: false, detail: `${target}: ${(err as Error).message}` };
  }
}

/** One GET with a hard timeout; https when the URL says so (with the given CA/client cert). */
export function httpGet(probe: HttpProbe, signal?: AbortSignal): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(probe.url);
    const secure = url.protocol === "https:";
    const options: https.RequestOptions = {
      method: "GET",
      timeout: probe.timeoutMs ?? 2000,
      ...(probe.socketPath ? { socketPath: probe.socketPath } : {}),
      ...(secure ? { ca: probe.ca, cert: probe.cert, key: probe.key } : {}),
      ...(signal ? { signal } : {}),
    };
    const request = (secure ? https : http).request(url, options, (res) => {
      readBody(res, 4096).then((body) => resolve({ status: res.statusCode ?? 0, body }), reject);
    });
    request.on("timeout", () => request.destroy(new Error(`no answer within ${options.timeout} ms`)));
    request.on("error", reject);
    request.end();
  });
}
