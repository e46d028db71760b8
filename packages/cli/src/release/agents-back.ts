import type { Api } from "../api.ts";

/**
 * "The agents are back" after a restart of the control plane, counted by host: each host whose
 * agent was connected before must be connected again. Open links are not the measure: a host
 * whose link flapped holds two for a moment (the old one not yet closed), which would stand in
 * for a host that never came back.
 */

export interface HostRow {
  id: string;
  hostname: string;
  responding: boolean;
}

/** Every host, as the admin sees them (every project's), with whether its agent is connected. */
export async function listHosts(api: Api): Promise<HostRow[]> {
  const rows = await api.get<{ id: string; info: { hostname: string }; responding: boolean }[]>("/v1/hosts");
  return rows.map((h) => ({ id: h.id, hostname: h.info.hostname, responding: h.responding }));
}

/** The hosts whose agent is connected now. */
export async function connectedHosts(api: Api): Promise<HostRow[]> {
  return (await listHosts(api)).filter((h) => h.responding);
}

/**
 * Waits until every host of `hostIds` is connected; undefined when they are, else what is
 * missing (how many, and the first few by name). A server that does not answer yet counts as
 * none back.
 */
export async function waitHostsBack(
  api: Api,
  hostIds: readonly string[],
  timeoutSeconds: number,
  pollMs = 250,
): Promise<string | undefined> {
  const until = Date.now() + timeoutSeconds * 1000;
  let missing: HostRow[] | undefined;
  for (;;) {
    try {
      const rows = new Map((await listHosts(api)).map((h) => [h.id, h]));
      missing = hostIds.flatMap((id) => {
        const row = rows.get(id);
        return row?.responding ? [] : [row ?? { id, hostname: "(no longer known)", responding: false }];
      });
      if (missing.length === 0) return undefined;
    } catch {
      missing = undefined;
    }
    if (Date.now() + pollMs > until) break;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  const names = (missing ?? []).slice(0, 5).map((h) => `${h.hostname} (${h.id})`);
  const count = missing?.length ?? hostIds.length;
  return (
    `only ${hostIds.length - count} of ${hostIds.length} hosts reconnected within ${timeoutSeconds} s` +
    (missing
      ? `: not back ${names.join(", ")}${count > names.length ? ` and ${count - names.length} more` : ""}`
      : " (the server did not answer)")
  );
}
