import { clusters, keelsonSchema, lockRows, type Tx } from "@keelson/db";
import { eq, ne } from "drizzle-orm";
import { conflict } from "../../../http/errors.ts";

/**
 * keepalived's virtual router id must be unique on the VIP's network segment. The control
 * plane cannot see segments, so it keeps the ids unique across every cluster it manages,
 * lowest free id first (spec §8: 0–254). Call inside the transaction that stores the cluster:
 * two creates at once on PostgreSQL take turns at the lock on the one `keelson_schema` row (the
 * database's one global row), so the second sees the first's id taken.
 */
export async function chooseVrouterId(db: Tx): Promise<string> {
  await lockRows(db, keelsonSchema, eq(keelsonSchema.id, 1));
  const used = new Set(
    (
      await db.select({ id: clusters.masterVipVrouterId }).from(clusters).where(ne(clusters.masterVipVrouterId, ""))
    ).map((r) => Number(r.id)),
  );
  for (let id = 0; id <= 254; id++) if (!used.has(id)) return String(id);
  throw conflict("all 255 keepalived virtual router ids (0-254) are in use by other clusters", "vrouter_ids_exhausted");
}
