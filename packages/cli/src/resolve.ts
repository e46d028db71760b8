import { CliError } from "./errors.ts";
import type { Session } from "./session.ts";

/** Clusters and hosts are named on the command line by name or uuid (or a unique uuid prefix). */

export interface ClusterRecord {
  uuid: string;
  name: string;
  status: string;
  taskStatus: string;
  taskError?: string;
  kubeRoleVersion: string;
  [key: string]: unknown;
}

export interface NodeRecord {
  uuid: string;
  name: string;
  primaryIp: string;
  status: string;
  isMaster: number;
  clusterName: string | null;
  clusterUuid: string | null;
  agentConnected: boolean;
  [key: string]: unknown;
}

export const listClusters = (s: Session) => s.api.get<ClusterRecord[]>(`/v4/${s.projectId}/clusters`);
export const listNodes = (s: Session) => s.api.get<NodeRecord[]>(`/v4/${s.projectId}/nodes`);

/** The one item whose uuid or name is `ref`; an exact uuid wins, then a name, then a uuid prefix. */
export function pick<T extends { uuid: string; name: string }>(items: readonly T[], ref: string, what: string): T {
  const exact = items.find((i) => i.uuid === ref);
  if (exact) return exact;
  const named = items.filter((i) => i.name === ref);
  if (named.length === 1) return named[0] as T;
  if (named.length > 1) throw new CliError(`${named.length} ${what}s are named "${ref}": give the uuid`);
  const prefixed = ref.length >= 4 ? items.filter((i) => i.uuid.startsWith(ref)) : [];
  if (prefixed.length === 1) return prefixed[0] as T;
  throw new CliError(`no ${what} "${ref}" in this project`);
}

export async function findCluster(s: Session, ref: string): Promise<ClusterRecord> {
  return pick(await listClusters(s), ref, "cluster");
}

export async function findNodes(s: Session, refs: readonly string[]): Promise<NodeRecord[]> {
  if (refs.length === 0) return [];
  const all = await listNodes(s);
  return refs.map((ref) => pick(all, ref, "host"));
}
