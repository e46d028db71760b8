import { agentLinks, type Db, databaseTime, dialectOf, nodes, perDatabase, prepare, replicas } from "@keelson/db";
import { and, eq, gt, inArray, isNotNull, ne, notInArray, or, sql } from "drizzle-orm";

/**
 * The agent_links table (DESIGN.md "Replicas"): which replica holds each host's link, one row per
 * host cluster-wide. Taking a link raises its epoch, so of two replicas that both think they hold
 * a host, the one with the lower epoch knows it was superseded; dropping one is conditional on
 * the epoch, so a late close never removes its successor's link. A dropped link leaves its row
 * with no replica and its epoch, so epochs only grow, across drops too.
 */

export interface LinkRow {
  hostId: string;
  replica: string;
  epoch: number;
}

/** Held: some replica holds the link (a dropped one's row has none). */
const held = isNotNull(agentLinks.replica);

/** A link another replica holds, with the host's project (connected hosts of one project) and what its agent takes. */
export interface HeldLink extends LinkRow {
  projectId: string;
  capabilities: string[] | null;
}

/**
 * A link's take and drop, built once per database: every agent takes its link at each connect
 * and drops it at each disconnect, and after a restart of the control plane every agent
 * connects again within seconds (building the statements each time was a third of their cost).
 */
const linkStatements = perDatabase((db) => {
  const now = databaseTime(dialectOf(db));
  const replica = sql.placeholder("replica");
  // The declared list as its JSON text (a placeholder is sent as given, not through the column's JSON mode).
  const capabilities = sql`${sql.placeholder("capabilities")}`;
  return {
    take: prepare(
      db,
      "agent_link_take",
      db
        .insert(agentLinks)
        .values({ hostId: sql.placeholder("hostId"), replica, epoch: 1, connectedAt: now, capabilities })
        .onConflictDoUpdate({
          target: agentLinks.hostId,
          set: { replica: sql`${replica}`, epoch: sql`${agentLinks.epoch} + 1`, connectedAt: now, capabilities },
        })
        .returning({ epoch: agentLinks.epoch }),
    ),
    drop: prepare(
      db,
      "agent_link_drop",
      db
        .update(agentLinks)
        .set({ replica: null })
        .where(
          and(
            eq(agentLinks.hostId, sql.placeholder("hostId")),
            eq(agentLinks.replica, replica),
            eq(agentLinks.epoch, sql.placeholder("epoch")),
          ),
        )
        .returning({ hostId: agentLinks.hostId }),
    ),
  };
});

/** Makes `replica` the holder of `hostId`'s link: one upsert; answers the new epoch. */
export async function takeLink(
  db: Db,
  hostId: string,
  replica: string,
  capabilities: readonly string[] = [],
): Promise<number> {
  const row = await linkStatements(db).take.get({ hostId, replica, capabilities: JSON.stringify(capabilities) });
  if (!row) throw new Error(`taking the link of host ${hostId} wrote no row`);
  return row.epoch;
}

/** Ends the link if it is still `replica`'s at `epoch`; false when another took it since. */
export async function dropLink(db: Db, hostId: string, replica: string, epoch: number): Promise<boolean> {
  return (await linkStatements(db).drop.get({ hostId, replica, epoch })) !== undefined;
}

/** Ends every link `replica` holds (its graceful stop); answers their hosts. */
export async function dropLinksOf(db: Db, replica: string): Promise<{ hostId: string }[]> {
  return await db
    .update(agentLinks)
    .set({ replica: null })
    .where(eq(agentLinks.replica, replica))
    .returning({ hostId: agentLinks.hostId });
}

/** Ids of the replicas whose heartbeat is younger than `leaseMs` (by the database's clock). */
function liveReplicaIds(db: Db, leaseMs: number) {
  return db
    .select({ id: replicas.id })
    .from(replicas)
    .where(gt(replicas.heartbeatAt, databaseTime(dialectOf(db), -leaseMs)));
}

/** Links held by live replicas other than `self` (what this replica learns at start and after a LISTEN gap). */
export async function linksElsewhere(db: Db, self: string, leaseMs: number): Promise<HeldLink[]> {
  const rows = await db
    .select({
      hostId: agentLinks.hostId,
      replica: agentLinks.replica,
      epoch: agentLinks.epoch,
      projectId: nodes.projectId,
      capabilities: agentLinks.capabilities,
    })
    .from(agentLinks)
    .innerJoin(nodes, eq(nodes.id, agentLinks.hostId))
    .where(and(ne(agentLinks.replica, self), inArray(agentLinks.replica, liveReplicaIds(db, leaseMs))));
  // A live replica's id matched: never null here.
  return rows.filter((r): r is HeldLink => r.replica !== null);
}

/**
 * Ends the links of replicas whose heartbeat ran out (they died holding them), never `self`'s
 * (its own row may be missing for a while: a start on a full disk). With `ownToo` (a start) also
 * `self`'s own, left by its previous process. Answers the links ended, with who held them.
 */
export async function reapLinks(db: Db, self: string, leaseMs: number, ownToo = false): Promise<LinkRow[]> {
  const dead = and(held, ne(agentLinks.replica, self), notInArray(agentLinks.replica, liveReplicaIds(db, leaseMs)));
  const which = ownToo ? or(eq(agentLinks.replica, self), dead) : dead;
  // Read first: the update's answer holds the new (empty) holder. A link taken again between
  // the two no longer matches `which`, and is neither ended nor answered.
  const found = await db
    .select({ hostId: agentLinks.hostId, replica: agentLinks.replica, epoch: agentLinks.epoch })
    .from(agentLinks)
    .where(which);
  if (found.length === 0) return [];
  const ended = new Set(
    (
      await db
        .update(agentLinks)
        .set({ replica: null })
        .where(
          and(
            which,
            inArray(
              agentLinks.hostId,
              found.map((r) => r.hostId),
            ),
          ),
        )
        .returning({ hostId: agentLinks.hostId })
    ).map((r) => r.hostId),
  );
  return found.filter((r): r is LinkRow => ended.has(r.hostId) && r.replica !== null);
}
