import { clusters, keelsonSchema, lockRows, type Tx } from "@keelson/db";
import { VROUTER_ID_MAX, VROUTER_ID_MIN } from "@keelson/protocol";
import { eq, ne } from "drizzle-orm";
import { conflict } from "../../../http/errors.ts";

/**
 * keepalived's virtual router id must be unique on the VIP's network segment. The control
 * plane cannot see segments, so it keeps the ids unique across every cluster it manages,
 * lowest free id first (spec §8: 0–254; the agent maps it to VRRP's 1–255 with the protocol's
 * `vrrpRouterId`). Call inside the transaction that stores the cluster:
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
  for (let id = VROUTER_ID_MIN; id <= VROUTER_ID_MAX; id++) if (!used.has(id)) return String(id);
  throw conflict(
    `all ${VROUTER_ID_MAX - VROUTER_ID_MIN + 1} keepalived virtual router ids (${VROUTER_ID_MIN}-${VROUTER_ID_MAX}) are in use by other clusters`,
    "vrouter_ids_exhausted",
  );
}
