import { resolve } from "node:path";

/**
 * The agent's env contract (DESIGN.md "Processes"). Flags of the same name, lower-case with
 * dashes (`--state-dir`, `--control-plane`), win over the environment.
 */
export interface AgentConfig {
  controlPlane: string;
  joinToken: string | undefined;
  stateDir: string;
  listen: { host: string; port: number };
  nodePackage: string;
  hostRoot: string;
  hostname: string | undefined;
  primaryIp: string | undefined;
  logLevel: string;
  /** How often host facts are collected again (sent only when they changed). */
  factsIntervalMs: number;
  /** Link reconnect backoff bounds (KEELSON_AGENT_RECONNECT_INITIAL_MS / _MAX_MS); tests shorten them. */
  reconnect: { initialMs: number; maxMs: number };
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

export function readAgentConfig(env: NodeJS.ProcessEnv, argv: string[] = []): AgentConfig {
  const flags = parseFlags(argv);
  const get = (name: string): string | undefined => {
    const flag =
      flags[
        name
          .replace(/^KEELSON_/, "")
          .toLowerCase()
          .replaceAll("_", "-")
      ];
    const value = flag ?? env[name];
    return value === undefined || value.trim() === "" ? undefined : value.trim();
  };
  const controlPlane = get("KEELSON_CONTROL_PLANE");
  if (!controlPlane) throw new ConfigError("KEELSON_CONTROL_PLANE is required (the control plane's URL)");
  if (!/^https?:\/\/[^/]+/.test(controlPlane)) {
    throw new ConfigError(`KEELSON_CONTROL_PLANE must be an http(s) URL (got "${controlPlane}")`);
  }
  const primaryIp = get("KEELSON_PRIMARY_IP");
  if (primaryIp !== undefined && !isIpAddress(primaryIp)) {
    throw new ConfigError(`KEELSON_PRIMARY_IP must be an IPv4 or IPv6 address (got "${primaryIp}")`);
  }
  return {
    controlPlane: controlPlane.replace(/\/+$/, ""),
    joinToken: get("KEELSON_JOIN_TOKEN"),
    stateDir: resolve(defaultStateDir(env, get("KEELSON_STATE_DIR"))),
    listen: parseListen(get("KEELSON_AGENT_LISTEN") ?? "127.0.0.1:8082"),
    nodePackage: resolve(get("KEELSON_NODE_PACKAGE") ?? "/opt/keelson/node"),
    hostRoot: resolve(get("KEELSON_HOST_ROOT") ?? "/"),
    hostname: get("KEELSON_HOSTNAME"),
    primaryIp,
    logLevel: get("KEELSON_LOG_LEVEL") ?? "info",
    factsIntervalMs: positiveInt(get("KEELSON_AGENT_FACTS_INTERVAL_MS"), 60_000, "KEELSON_AGENT_FACTS_INTERVAL_MS"),
    reconnect: reconnectBounds(get),
  };
}

/**
 * systemd's StateDirectory= sets $STATE_DIRECTORY (a colon-separated list when several are
 * configured; the first is ours). The launcher uses the same rule, so keep it in one place.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv, explicit?: string): string {
  const fromEnv = explicit ?? (env.KEELSON_STATE_DIR?.trim() || undefined);
  if (fromEnv) return fromEnv;
  const systemd = env.STATE_DIRECTORY?.split(":")[0]?.trim();
  return systemd || "/var/lib/keelson-agent";
}

export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(listen.trim());
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`KEELSON_AGENT_LISTEN must be host:port (got "${listen}")`);
  }
  return { host: match[1] ?? (match[2] || "127.0.0.1"), port };
}

function reconnectBounds(get: (name: string) => string | undefined): { initialMs: number; maxMs: number } {
  const maxMs = positiveInt(get("KEELSON_AGENT_RECONNECT_MAX_MS"), 30_000, "KEELSON_AGENT_RECONNECT_MAX_MS");
  const initialMs = positiveInt(
    get("KEELSON_AGENT_RECONNECT_INITIAL_MS"),
    Math.min(500, maxMs),
    "KEELSON_AGENT_RECONNECT_INITIAL_MS",
  );
  if (initialMs > maxMs) {
    throw new ConfigError("KEELSON_AGENT_RECONNECT_INITIAL_MS must not exceed KEELSON_AGENT_RECONNECT_MAX_MS");
  }
  return { initialMs, maxMs };
}

function positiveInt(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new ConfigError(`${name} must be a positive integer (got "${value}")`);
  return n;
}

function isIpAddress(value: string): boolean {
  if (/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/.test(value)) return true;
  return value.includes(":") && /^[0-9a-fA-F:.]+$/.test(value);
}

function parseFlags(argv: string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--")) continue;
    const [name, inline] = arg.slice(2).split("=", 2) as [string, string | undefined];
    const value = inline ?? argv[i + 1];
    if (inline === undefined) i++;
    if (value !== undefined) flags[name] = value;
  }
  return flags;
}
