import { api, type ServerProc } from "./processes.ts";

/** A join-token answer as the e2e tests read it. */
export interface JoinTokenAnswer {
  id: string;
  token: string;
  caCertHash: string | null;
  installCommand: string | null;
}

/** Issues a join token in `projectId` with the server's admin token; throws unless it is a 201. */
export async function issueJoinToken(server: ServerProc, projectId: string, doFetch?: typeof fetch) {
  const res = await api<JoinTokenAnswer>(`${server.url}/v1/projects/${projectId}/joinTokens`, server.adminToken, {
    method: "POST",
    body: {},
    ...(doFetch ? { fetch: doFetch } : {}),
  });
  if (res.status !== 201) throw new Error(`join token: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** When the join token was spent (null: not yet; undefined: no such token). */
export async function joinTokenUsedAt(server: ServerProc, projectId: string, id: string, doFetch?: typeof fetch) {
  const listed = await api<{ joinTokens: { id: string; usedAt: string | null }[] }>(
    `${server.url}/v1/projects/${projectId}/joinTokens`,
    server.adminToken,
    doFetch ? { fetch: doFetch } : {},
  );
  return listed.body.joinTokens.find((t) => t.id === id)?.usedAt;
}
