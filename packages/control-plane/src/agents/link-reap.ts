import type { FastifyBaseLogger } from "fastify";
import type { LinkBook } from "./link-book.ts";
import type { Presence } from "./link-domain.ts";
import type { NodeEvents } from "./node-events.ts";

/**
 * At start, before the first link: the links this replica's previous process and dead
 * replicas held are removed, and the hosts no live replica holds are marked disconnected
 * (hosts linked to another live replica stay connected).
 */
export async function resetStalePresence(
  linkBook: LinkBook,
  presence: Presence,
  log: FastifyBaseLogger,
): Promise<void> {
  await linkBook.reapAtStart();
  const stale = await presence.resetUnlinked();
  if (stale > 0) log.info({ hosts: stale }, "marked hosts disconnected after a restart");
}

/** Run with each replica heartbeat: the links of replicas that died are removed, their hosts marked disconnected. */
export async function reapDeadLinks(linkBook: LinkBook, presence: Presence, nodeEvents: NodeEvents): Promise<void> {
  const hosts = await linkBook.reap();
  if (hosts.length === 0) return;
  await presence.resetUnlinked();
  for (const { hostId, projectId } of hosts) nodeEvents.emit({ type: "link", hostId, projectId, connected: false });
}
