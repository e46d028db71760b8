import { readFileSync } from "node:fs";
import { join } from "node:path";
import { api, freePort, type Proc, start, tempDir, waitUntil } from "./processes.ts";

/** A `keelson-agent` started as the README says: `npx keelson-agent` from the repository root. */
export interface AgentProc extends Proc {
  name: string;
  stateDir: string;
  listen: string;
  /** The host id the agent registered as (reads <state dir>/identity.json). */
  hostId(): string | undefined;
  /** The local API token (reads <state dir>/local-api.token). */
  localToken(): string;
}

export interface AgentOptions {
  name: string;
  controlPlane: string;
  joinToken?: string;
  stateDir?: string;
  port?: number;
  /** The loopback address to listen on (default 127.0.0.1). */
  host?: string;
  env?: Record<string, string>;
  /** The checkout whose keelson-agent runs (default this one), e.g. a previous release's worktree. */
  root?: string;
}

export async function startAgent(options: AgentOptions): Promise<AgentProc> {
  const stateDir = options.stateDir ?? tempDir(`keelson-e2e-${options.name}-`);
  const host = options.host ?? "127.0.0.1";
  const listen = `${host}:${options.port ?? (await freePort(host))}`;
  const proc = start(
    "npx",
    ["--no-install", "keelson-agent"],
    {
      KEELSON_CONTROL_PLANE: options.controlPlane,
      KEELSON_STATE_DIR: stateDir,
      KEELSON_AGENT_LISTEN: listen,
      KEELSON_HOSTNAME: options.name,
      KEELSON_LOG_LEVEL: "info",
      // Short reconnect delays: the control plane restarts within the tests.
      KEELSON_AGENT_RECONNECT_INITIAL_MS: "100",
      KEELSON_AGENT_RECONNECT_MAX_MS: "1000",
      ...(options.joinToken ? { KEELSON_JOIN_TOKEN: options.joinToken } : {}),
      ...options.env,
    },
    options.root,
  );
  return {
    ...proc,
    name: options.name,
    stateDir,
    listen,
    hostId: () => {
      try {
        return (JSON.parse(readFileSync(join(stateDir, "identity.json"), "utf8")) as { hostId?: string }).hostId;
      } catch {
        return undefined;
      }
    },
    localToken: () => readFileSync(join(stateDir, "local-api.token"), "utf8").trim(),
  };
}

/**
 * Waits until the agents of every named host are connected, noting each node's uuid in `ids`
 * (by name) on the way.
 */
export async function waitForAgents(
  serverUrl: string,
  projectId: string,
  token: string,
  names: readonly string[],
  ids: Record<string, string> = {},
  what = `${names.length} agents connected`,
): Promise<Record<string, string>> {
  await waitUntil(
    what,
    async () => {
      const res = await api<{ uuid: string; name: string; agentConnected: boolean }[]>(
        `${serverUrl}/v4/${projectId}/nodes`,
        token,
      );
      for (const n of res.body) ids[n.name] = n.uuid;
      return names.every((name) => res.body.some((n) => n.name === name && n.agentConnected));
    },
    60_000,
  );
  return ids;
}
