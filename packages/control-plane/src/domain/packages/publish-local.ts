import type { Keelson } from "../../context.ts";
import { agentShelf } from "./agent-shelf.ts";
import { ImageArchiveStore } from "./image-archives.ts";
import { nodeShelf } from "./node-shelf.ts";

/**
 * At start on PostgreSQL: the packages and image archives of this data dir that the database
 * lacks are stored there, so every replica lists and serves them (shelf.ts, image-archives.ts,
 * publishLocal). On SQLite nothing to do.
 */
export async function publishLocalShelves(k: Pick<Keelson, "store" | "dataDir" | "catalogue" | "log">): Promise<void> {
  const shelves = [
    { label: "agent packages", shelf: agentShelf(k) },
    { label: "node packages", shelf: nodeShelf(k) },
    { label: "image archives", shelf: new ImageArchiveStore(k) },
  ];
  for (const { label, shelf } of shelves) {
    const { published, skipped } = await shelf.publishLocal();
    if (published.length > 0) k.log.info({ versions: published }, `${label} of the data dir stored in the database`);
    if (skipped.length > 0) k.log.warn({ versions: skipped }, `${label} of the data dir not stored in the database`);
  }
}
