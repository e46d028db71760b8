import { type Db, firstRow, hostPresence, nodes } from "@keelson/db";
import { buildHostRecord, type HostRecord } from "@keelson/protocol";
import { and, eq, type SQL } from "drizzle-orm";
import { notFound } from "../../http/errors.ts";
import { keysetPage, type PageRequest } from "../../http/paging.ts";
import type { Identity } from "../identity/resolver.ts";
import { afterNode, NODE_LIST_ORDER, nodeMarkerOf } from "../nodes/list-order.ts";
import { NODE_COLUMNS, PRESENCE_OF_NODE } from "./last-seen.ts";

/**
 * The host resource of the control plane (`/v1/hosts`, also under `/resmgr/v1/hosts`): the
 * port-8082 host record of every host the caller can see, built from the agent's last report
 * in the nodes table. An agent that is away reads `responding: false` with the time it was
 * last heard from; the rest is what it last said.
 */
type NodeRow = typeof nodes.$inferSelect;

export function hostRecordOf(row: NodeRow): HostRecord {
  return buildHostRecord({
    id: row.id,
    facts: row.facts,
    hostname: row.name,
    primaryIp: row.primaryIp,
    responding: row.agentConnected === 1,
    lastSeen: row.lastSeen,
    agentVersion: row.agentVersion,
    agentStatus: row.agentStatus === "updating" ? "updating" : "running",
    agentError: row.agentError,
    roles: [],
    nodeStatus: row.status,
    clusterUuid: row.clusterId,
    phases: Array.isArray(row.phases) ? row.phases : [],
  });
}

/** Hosts the caller may see: every host for the admin, its project's for a project token. */
function visible(identity: Identity): SQL | undefined {
  return identity.kind === "admin" ? undefined : eq(nodes.projectId, identity.projectId);
}

/** The hosts the caller sees, oldest first. */
export async function listHosts(db: Db, identity: Identity): Promise<NodeRow[]> {
  return db
    .select(NODE_COLUMNS)
    .from(nodes)
    .leftJoin(hostPresence, PRESENCE_OF_NODE)
    .where(visible(identity))
    .orderBy(...NODE_LIST_ORDER);
}

/** A page of them: `limit` hosts after `after` (from the first without), and the marker of the next. */
export async function listHostsPage(
  db: Db,
  identity: Identity,
  page: PageRequest,
): Promise<{ items: NodeRow[]; next?: string }> {
  const where = await afterNode(db, visible(identity), page.after);
  // One row more than the page: whether there is a next page, without counting.
  const rows = await db
    .select(NODE_COLUMNS)
    .from(nodes)
    .leftJoin(hostPresence, PRESENCE_OF_NODE)
    .where(where)
    .orderBy(...NODE_LIST_ORDER)
    .limit(page.limit + 1);
  return keysetPage(rows, nodeMarkerOf, page.limit);
}

/** A host of another project is as unknown to the caller as one that does not exist. */
export async function findHost(db: Db, identity: Identity, hostId: string): Promise<NodeRow> {
  const row = firstRow(
    await db
      .select(NODE_COLUMNS)
      .from(nodes)
      .leftJoin(hostPresence, PRESENCE_OF_NODE)
      .where(and(eq(nodes.id, hostId), visible(identity))),
  );
  if (!row) throw notFound("host", hostId);
  return row;
}
