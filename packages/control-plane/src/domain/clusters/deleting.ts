import type { Tx } from "@keelson/db";
import { conflict } from "../../http/errors.ts";
import { activeOperationFor } from "../../runner/store.ts";
import { CLUSTER_OPS } from "./operations.ts";
import type { ClusterRow } from "./views.ts";

/** A cluster on its way out takes no other change (409 `cluster_deleting`). */
export async function assertNotDeleting(db: Tx, cluster: ClusterRow): Promise<void> {
  if (
    cluster.status === "deleting" ||
    (await activeOperationFor(db, cluster.id, [CLUSTER_OPS.delete, CLUSTER_OPS.awsDelete]))
  ) {
    throw conflict(`cluster ${cluster.id} is being deleted`, "cluster_deleting");
  }
}
