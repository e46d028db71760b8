import { runPool } from "./pool.ts";

export interface SimIdentity {
  hostId: string;
  credential: string;
  projectId: string;
}

/** Where the join tokens for a fleet come from. */
export type JoinTokenSource =
  | { joinTokens: string[] }
  /** The simulator mints one join token per agent with the admin token, like an operator would. */
  | { adminToken: string; projectId: string };

async function post<T>(doFetch: typeof fetch, url: string, body: unknown, token?: string): Promise<T> {
  const res = await doFetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { "x-auth-token": token } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${url} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** Registers `hostnames.length` hosts through the real registration API. */
export async function registerFleet(
  baseUrl: string,
  hostnames: string[],
  source: JoinTokenSource,
  options: {
    concurrency?: number;
    agentVersion?: string;
    /** A fetch that verifies an https control plane against the fleet's trust (sim/trust.ts). */
    fetch?: typeof fetch;
  } = {},
): Promise<SimIdentity[]> {
  const doFetch = options.fetch ?? fetch;
  if ("joinTokens" in source && source.joinTokens.length < hostnames.length) {
    throw new Error(`need one join token per agent: ${hostnames.length} agents, ${source.joinTokens.length} tokens`);
  }
  return runPool(hostnames.length, options.concurrency ?? 50, async (i) => {
    const joinToken =
      "joinTokens" in source
        ? (source.joinTokens[i] as string)
        : (
            await post<{ token: string }>(
              doFetch,
              `${baseUrl}/v1/projects/${source.projectId}/joinTokens`,
              { expiresInMinutes: 60 },
              source.adminToken,
            )
          ).token;
    return post<SimIdentity>(doFetch, `${baseUrl}/v1/agents/register`, {
      joinToken,
      hostname: hostnames[i],
      agentVersion: options.agentVersion ?? "0.0.0-sim",
    });
  });
}
