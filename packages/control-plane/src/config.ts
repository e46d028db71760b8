import { resolve } from "node:path";

export interface ServerConfig {
  host: string;
  port: number;
  dataDir: string;
  adminToken: string | undefined;
  logLevel: string;
  /** Agent link ping interval (KEELSON_AGENT_HEARTBEAT_MS); benchmarks shorten it. */
  agentHeartbeatMs: number | undefined;
}

/** Reads the env contract of DESIGN.md "Processes"; flags of the same name win. */
export function readConfig(env: NodeJS.ProcessEnv, argv: string[] = []): ServerConfig {
  const flags = parseFlags(argv);
  const listen = flags.listen ?? env.KEELSON_LISTEN ?? "127.0.0.1:8080";
  const { host, port } = parseListen(listen);
  return {
    host,
    port,
    dataDir: resolve(flags["data-dir"] ?? env.KEELSON_DATA_DIR ?? "./.keelson"),
    adminToken: flags["admin-token"] ?? env.KEELSON_ADMIN_TOKEN ?? undefined,
    logLevel: flags["log-level"] ?? env.KEELSON_LOG_LEVEL ?? "info",
    agentHeartbeatMs: positiveInt(
      flags["agent-heartbeat-ms"] ?? env.KEELSON_AGENT_HEARTBEAT_MS,
      "KEELSON_AGENT_HEARTBEAT_MS",
    ),
  };
}

export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(listen.trim());
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`KEELSON_LISTEN must be host:port (got "${listen}")`);
  }
  return { host: match[1] ?? match[2] ?? "127.0.0.1", port };
}

function positiveInt(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer (got "${value}")`);
  return n;
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
