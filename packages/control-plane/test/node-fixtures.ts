import { randomUUID } from "node:crypto";
import { cloudProviders, clusters, type Db, firstRow, nodePools, nodes, one } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { type ClusterSpec, SPEC_DEFAULTS } from "../src/domain/clusters/spec/fields.ts";

/** Rows as registration and the agent hub leave them, written directly for route tests. */

export async function localPool(db: Db, projectId: string): Promise<{ poolId: string; providerId: string }> {
  const row = firstRow(
    await db
      .select({ poolId: nodePools.id, providerId: cloudProviders.id })
      .from(nodePools)
      .innerJoin(cloudProviders, eq(cloudProviders.id, nodePools.cloudProviderId))
      .where(and(eq(nodePools.projectId, projectId), eq(cloudProviders.type, "local"))),
  );
  if (!row) throw new Error(`project ${projectId} has no local pool`);
  return row;
}

export const sampleFacts = (hostname: string, ip: string) => ({
  hostname,
  os: {
    platform: "linux",
    family: "debian",
    distro: "Debian GNU/Linux",
    release: "12",
    codename: "bookworm",
    kernel: "6.1.0",
  },
  arch: "x64",
  cpu: { model: "Example CPU", count: 2 },
  memory: { totalBytes: 4294967296 },
  disks: [{ name: "/dev/vda", type: "SSD", sizeBytes: 10737418240 }],
  interfaces: [{ name: "eth0", mac: "02:00:00:00:00:01", addresses: [ip, "fe80::1"] }],
  primaryIp: ip,
  agentVersion: "0.1.0",
});

export async function insertHost(
  db: Db,
  projectId: string,
  values: Partial<typeof nodes.$inferInsert> & { name: string },
): Promise<typeof nodes.$inferSelect> {
  const { poolId } = await localPool(db, projectId);
  return one(
    await db
      .insert(nodes)
      .values({
        id: randomUUID(),
        projectId,
        nodePoolId: poolId,
        primaryIp: "10.0.0.1",
        agentVersion: "0.1.0",
        ...values,
      })
      .returning(),
  );
}

/** A stored spec as the parser leaves it: the §8 defaults, a runtime, and what the test sets. */
export function storedSpec(fields: Partial<ClusterSpec> & Pick<ClusterSpec, "name" | "kubeRoleVersion">): ClusterSpec {
  return { ...SPEC_DEFAULTS, containerRuntime: "containerd", ...fields };
}

export async function insertCluster(
  db: Db,
  projectId: string,
  name: string,
  spec: Partial<ClusterSpec> = {},
): Promise<string> {
  const { poolId, providerId } = await localPool(db, projectId);
  const id = randomUUID();
  await db.insert(clusters).values({
    id,
    projectId,
    name,
    nodePoolId: poolId,
    cloudProviderId: providerId,
    kubeRoleVersion: "1.29.2-pmk.1",
    spec: storedSpec({ name, kubeRoleVersion: "1.29.2-pmk.1", ...spec }),
    caCertPem: "test",
    caKeyEnc: "test",
  });
  return id;
}
