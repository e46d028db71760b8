import type { Keelson } from "../../context.ts";
import { agentShelf } from "./agent-shelf.ts";
import { nodeShelf } from "./node-shelf.ts";

/**
 * At start on PostgreSQL: the packages of this data dir's shelves that the database lacks are
 * stored there, so every replica lists and serves them (shelf.ts, publishLocal). On SQLite
 * nothing to do.
 */
export async function publishLocalShelves(k: Pick<Keelson, "store" | "dataDir" | "catalogue" | "log">): Promise<void> {
  for (const shelf of [agentShelf(k), nodeShelf(k)]) {
    const { published, skipped } = await shelf.publishLocal();
    if (published.length > 0)
      k.log.info({ versions: published }, `${shelf.kind.label}s of the data dir stored in the database`);
    if (skipped.length > 0)
      k.log.warn({ versions: skipped }, `${shelf.kind.label}s of the data dir not stored in the database`);
  }
}
