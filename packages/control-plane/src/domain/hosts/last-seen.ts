import { hostPresence, nodes } from "@keelson/db";
import { eq, getTableColumns, sql } from "drizzle-orm";

/**
 * When a host's agent was last heard from: the later of its row's `last_seen` (set by connects,
 * disconnects and reports) and its heartbeats' (`host_presence`, presence.ts). Both are ISO-8601
 * text to the millisecond, so text order is time order on both dialects. Read with
 * `leftJoin(hostPresence, PRESENCE_OF_NODE)`.
 */
export const LAST_SEEN = sql<
  string | null
>`case when ${hostPresence.lastSeen} is null or ${nodes.lastSeen} >= ${hostPresence.lastSeen} then ${nodes.lastSeen} else ${hostPresence.lastSeen} end`;

/** The join that brings a node's heartbeats beside it (a host never heard from has none). */
export const PRESENCE_OF_NODE = eq(hostPresence.hostId, nodes.id);

/** Every column of a node, its `lastSeen` the one above. */
export const NODE_COLUMNS = { ...getTableColumns(nodes), lastSeen: LAST_SEEN };
