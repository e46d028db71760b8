import type { Api } from "../api.ts";

/**
 * One replica of several on a shared PostgreSQL database (README "Rolling upgrade of the
 * replicas"). The rule the upgrade and the rollback follow: a replica's upgrade never puts the
 * shared database back by itself (a restore would undo the other replicas' writes, and the
 * restore refuses while any of them is connected anyway); if it fails, only this replica's
 * release is switched back, onto the database as the new release's expand-only migrations left
 * it. A database rollback is for the whole set: every replica stopped first, one restore, then
 * each replica started on the restored release.
 */

export interface PeerReplica {
  id: string;
  url: string;
  version: string;
}

/** The other live replicas on the database, as the installed server lists them (its own row says `self`). */
export async function otherLiveReplicas(api: Api): Promise<PeerReplica[]> {
  const rows =
    await api.get<{ id: string; url: string; version: string; live: boolean; self: boolean }[]>("/v1/replicas");
  return rows.filter((r) => r.live && !r.self).map(({ id, url, version }) => ({ id, url, version }));
}

export function namePeers(peers: readonly PeerReplica[]): string {
  return peers.map((p) => `${p.id} (${p.version} at ${p.url})`).join(", ");
}
