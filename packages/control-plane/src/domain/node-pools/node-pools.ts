import { cloudProviders, type Db, nodePools } from "@keelson/db";
import { asc, eq } from "drizzle-orm";

/** A node pool record (spec §2.4): one per provider account, named after it. */
export interface NodePoolView {
  name: string;
  uuid: string;
  cloudProviderUuid: string;
  cloudProviderName: string;
}

export async function listNodePools(db: Db, projectId: string): Promise<NodePoolView[]> {
  return await db
    .select({
      name: nodePools.name,
      uuid: nodePools.id,
      cloudProviderUuid: cloudProviders.id,
      cloudProviderName: cloudProviders.name,
    })
    .from(nodePools)
    .innerJoin(cloudProviders, eq(cloudProviders.id, nodePools.cloudProviderId))
    .where(eq(nodePools.projectId, projectId))
    .orderBy(asc(nodePools.createdAt), asc(nodePools.name));
}
