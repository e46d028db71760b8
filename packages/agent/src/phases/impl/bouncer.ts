import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { urlHost } from "@keelson/protocol";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import { childPath } from "../../services/child-path.ts";
import type { ServiceSpec } from "../../services/types.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { type DesiredFile, hashOf, servicePhase } from "./common.ts";

/**
 * Configure and start the node bouncer (masters): the token-review webhook the apiserver asks
 * about bearer tokens (../bouncer/server.ts, run with node + tsx as a supervised service, TLS
 * with the `bouncer` certificate, bound to the primary IP). Also writes the apiserver's webhook
 * kubeconfig that points at it.
 */

/**
 * How to run the bouncer program, found when first needed (never at import: a bundled agent has
 * neither tsx nor the sources). From the sources: node + tsx on ../bouncer/server.ts. From a
 * packed agent: node on `node-bouncer.mjs` bundled beside the agent's own file.
 */
export function bouncerCommand(): { command: string; args: string[] } {
  const source = fileURLToPath(new URL("../bouncer/server.ts", import.meta.url));
  const bundled = fileURLToPath(new URL("./node-bouncer.mjs", import.meta.url));
  if (existsSync(source)) {
    try {
      const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
      return { command: process.execPath, args: ["--import", tsx, source] };
    } catch {
      // No tsx here: try the bundled program.
    }
  }
  if (existsSync(bundled)) return { command: process.execPath, args: [bundled] };
  throw new PhaseError(`the node bouncer program is missing: looked for ${source} (with tsx) and ${bundled}`);
}

function bouncerUrl(ctx: PhaseContext): string {
  const ip = urlHost(ctx.config.primaryIp);
  return `https://${ip}:${ctx.config.ports.bouncer}`;
}

export function bouncerFiles(ctx: PhaseContext): DesiredFile[] {
  const { config, paths } = ctx;
  for (const token of config.bouncer.tokens) {
    if (!/^[0-9a-f]{64}$/.test(token.sha256)) {
      throw new PhaseError(`bouncer token for "${token.username}" is not a lower-case hex sha256`);
    }
  }
  const webhook = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "node-bouncer",
        cluster: { server: `${bouncerUrl(ctx)}/authenticate`, "certificate-authority": paths.caCert },
      },
    ],
    users: [{ name: "kube-apiserver", user: {} }],
    contexts: [{ name: "webhook", context: { cluster: "node-bouncer", user: "kube-apiserver" } }],
    "current-context": "webhook",
  };
  const files: DesiredFile[] = [
    { path: paths.apiserverWebhookConfig, content: `${JSON.stringify(webhook, null, 2)}\n` },
  ];
  if (!config.bouncer.verifyUrl) {
    files.push({
      path: paths.bouncerTokens,
      content: `${JSON.stringify({ tokens: config.bouncer.tokens }, null, 2)}\n`,
      mode: 0o600,
    });
  }
  return files;
}

function bouncerSpec(ctx: PhaseContext, files: DesiredFile[]): ServiceSpec {
  const { config, paths } = ctx;
  const program = bouncerCommand();
  const ip = urlHost(config.primaryIp);
  return {
    name: "node-bouncer",
    description: "node bouncer (token-review webhook)",
    command: program.command,
    args: [
      ...program.args,
      "--listen",
      `${ip}:${config.ports.bouncer}`,
      "--tls-cert",
      paths.cert("bouncer"),
      "--tls-key",
      paths.key("bouncer"),
      ...(config.bouncer.verifyUrl
        ? ["--verify-url", config.bouncer.verifyUrl]
        : ["--tokens-file", paths.bouncerTokens]),
    ],
    // The tokens file is reread on change; only the listener settings need a restart.
    env: { PATH: childPath(), KEELSON_CONFIG_HASH: hashOf(files[0]?.content) },
    health: { kind: "http", url: `${bouncerUrl(ctx)}/healthz`, ca: readTextOrUndefined(ctx.paths.caCert) },
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

export const nodeBouncer = servicePhase({
  id: "node-bouncer",
  service: "node-bouncer",
  files: bouncerFiles,
  spec: bouncerSpec,
  ports: (ctx) => [ctx.config.ports.bouncer],
  started: (ctx, status) => {
    const source = ctx.config.bouncer.verifyUrl
      ? `verifier ${ctx.config.bouncer.verifyUrl}`
      : `${ctx.config.bouncer.tokens.length} token(s)`;
    return `listening on ${bouncerUrl(ctx)} (pid ${status.pid}; ${source})`;
  },
});
