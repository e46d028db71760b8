import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isLoopbackHost } from "@keelson/protocol";
import { Api } from "../api.ts";
import { type HostRow, listHosts } from "./agents-back.ts";
import { type Layout, readEnvFile, releaseDir } from "./layout.ts";
import { readReleaseManifest } from "./manifest.ts";

/**
 * The installed keelson-server as the operator's commands reach it: its own commands (`backup`,
 * `restore`) run from a given release with the unit's environment, and its API on the address
 * server.env names, with the admin token from the data dir.
 */

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The unit's environment: server.env and PATH, nothing else of the caller's. */
export function serverEnv(layout: Layout, path: string): Record<string, string> {
  return { ...readEnvFile(layout.serverEnv), PATH: path };
}

/** The database the installed server runs on, by its server.env (KEELSON_DATABASE_URL set: PostgreSQL). */
export function serverDialect(layout: Layout): "sqlite" | "postgres" {
  return readEnvFile(layout.serverEnv).KEELSON_DATABASE_URL ? "postgres" : "sqlite";
}

/** `keelson-server <args>` of release `version`. */
export function runServerCommand(
  layout: Layout,
  version: string,
  args: string[],
  path: string,
): Promise<CommandResult> {
  const dir = releaseDir(layout, version);
  const entry = join(dir, readReleaseManifest(dir).entries.server);
  return runNode([entry, ...args], { env: serverEnv(layout, path), cwd: layout.dataDir });
}

/** `node <args>` to its end, its output collected; killed after `timeoutMs` when given. */
export function runNode(
  args: string[],
  options: { env: Record<string, string>; cwd: string; timeoutMs?: number },
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      env: options.env,
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = options.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), options.timeoutMs) : undefined;
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Where this host reaches the installed server: its listen address (a wildcard as loopback), http or https. */
export function serverApiUrl(layout: Layout): string {
  const env = readEnvFile(layout.serverEnv);
  const listen = env.KEELSON_LISTEN ?? "127.0.0.1:8080";
  const colon = listen.lastIndexOf(":");
  let host = listen.slice(0, colon).replace(/^\[|\]$/g, "");
  if (host === "0.0.0.0" || host === "") host = "127.0.0.1";
  if (host === "::") host = "::1";
  // The server's own rule for its default (plain HTTP on any loopback address, 127.0.0.2 too).
  const loopback = isLoopbackHost(host);
  const tls = env.KEELSON_TLS ? env.KEELSON_TLS !== "off" : !loopback;
  return `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${listen.slice(colon + 1)}`;
}

/** The API of the installed server, as the admin. */
export function serverApi(layout: Layout, timeoutMs = 5_000): Api {
  const env = readEnvFile(layout.serverEnv);
  const url = serverApiUrl(layout);
  const tls = url.startsWith("https:");
  const dataDir = env.KEELSON_DATA_DIR ?? layout.dataDir;
  const tokenFile = join(dataDir, "admin-token");
  const token = env.KEELSON_ADMIN_TOKEN ?? (existsSync(tokenFile) ? readFileSync(tokenFile, "utf8").trim() : undefined);
  const caFile = join(dataDir, "tls", "ca.crt");
  return new Api({
    url,
    token,
    caFile: tls && existsSync(caFile) ? caFile : undefined,
    timeoutMs,
  });
}

export interface Readiness {
  ready: boolean;
  /** What /readyz said, or why it could not be asked. */
  status: string;
  agentLinks: number;
}

export async function readiness(api: Api): Promise<Readiness> {
  try {
    const body = await api.get<{ status: string; agentLinks: { open: number } }>("/readyz");
    return { ready: true, status: body.status, agentLinks: body.agentLinks.open };
  } catch (err) {
    return { ready: false, status: (err as Error).message, agentLinks: 0 };
  }
}

export interface Inventory {
  clusters: { uuid: string; name: string; project: string }[];
  hosts: HostRow[];
}

/** Every project's clusters and every host, as the admin sees them. */
export async function inventory(api: Api): Promise<Inventory> {
  const { projects } = await api.get<{ projects: { id: string; name: string }[] }>("/v1/projects");
  const clusters: Inventory["clusters"] = [];
  for (const p of projects) {
    const list = await api.get<{ uuid: string; name: string }[]>(`/v4/${p.id}/clusters`);
    for (const c of list) clusters.push({ uuid: c.uuid, name: c.name, project: p.name });
  }
  return { clusters, hosts: await listHosts(api) };
}
