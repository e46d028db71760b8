import { randomUUID } from "node:crypto";
import { cloudProviders, clusters, type Db, externalClusters, firstRow, nodePools, nodes, type Tx } from "@keelson/db";
import { and, asc, eq, ne, or } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import { verifyWithCloud } from "./cloud-checks.ts";
import { type Credentials, checkCredentials } from "./credentials.ts";
import { type ApiVersion, LOCAL_TYPE, type ProviderType, requireCreatableType } from "./provider-types.ts";

/**
 * Cloud provider accounts (spec §2.3) and the node pool each one owns (§2.4). Credentials are
 * sealed with the data dir's key before they reach the database and no read here but
 * `storedCredentials` selects them, for the cloud calls. The cloud is asked whether it accepts
 * credentials before they are stored (cloud-checks.ts), outside any transaction: a slow cloud
 * must not hold the store's write lock.
 */
export interface ProviderRecord {
  id: string;
  projectId: string;
  name: string;
  type: string;
  nodePoolId: string;
  nodePoolName: string;
}

export interface ProviderInput extends Credentials {
  name: string;
  type: string;
}

export interface ProviderPatch {
  name?: string;
  key?: string;
  secret?: string;
}

const MAX_NAME_LENGTH = 255;

/** The node pool of an account is named after it; the local provider's pool keeps its own name. */
export const poolNameOf = (providerName: string) => `${providerName}-pool`;

export function checkName(name: string): string {
  if (name.trim() === "") throw badRequest("name", "name cannot be empty");
  if (name.length > MAX_NAME_LENGTH) throw badRequest("name", `name is longer than ${MAX_NAME_LENGTH} characters`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to refuse control characters
  if (/[\u0000-\u001f\u007f]/.test(name)) throw badRequest("name", "name cannot contain control characters");
  return name;
}

function selectRecords(tx: Tx) {
  return tx
    .select({
      id: cloudProviders.id,
      projectId: cloudProviders.projectId,
      name: cloudProviders.name,
      type: cloudProviders.type,
      nodePoolId: nodePools.id,
      nodePoolName: nodePools.name,
    })
    .from(cloudProviders)
    .leftJoin(nodePools, eq(nodePools.cloudProviderId, cloudProviders.id));
}

type JoinedRow = Omit<ProviderRecord, "nodePoolId" | "nodePoolName"> & {
  nodePoolId: string | null;
  nodePoolName: string | null;
};

function toRecord(row: JoinedRow): ProviderRecord {
  return { ...row, nodePoolId: row.nodePoolId ?? "", nodePoolName: row.nodePoolName ?? "" };
}

export async function listProviders(db: Db, projectId: string): Promise<ProviderRecord[]> {
  const rows = await selectRecords(db)
    .where(eq(cloudProviders.projectId, projectId))
    .orderBy(asc(cloudProviders.createdAt), asc(cloudProviders.name));
  return rows.map(toRecord);
}

export async function getProvider(tx: Tx, projectId: string, id: string): Promise<ProviderRecord> {
  const row = firstRow(
    await selectRecords(tx).where(and(eq(cloudProviders.projectId, projectId), eq(cloudProviders.id, id))),
  );
  if (!row) throw notFound("cloud provider", id);
  return toRecord(row);
}

/** For the update routes that carry no project in the path: the caller's access is checked on the result. */
export async function findProviderAnywhere(db: Db, id: string): Promise<ProviderRecord | undefined> {
  const row = firstRow(await selectRecords(db).where(eq(cloudProviders.id, id)));
  return row ? toRecord(row) : undefined;
}

/** The checks shared by create and validate: name, a type this version creates, well-formed credentials. */
export function checkProviderInput(version: ApiVersion, input: ProviderInput): Exclude<ProviderType, "local"> {
  checkName(input.name);
  const type = requireCreatableType(version, input.type);
  checkCredentials(type, { key: input.key, secret: input.secret });
  return type;
}

/**
 * `validate` checks a body before it is used to create an account, the credentials with the
 * cloud too. The local provider takes no credentials, so validating one is a malformed request
 * rather than the conflict create answers.
 */
export async function validateProviderInput(
  keelson: Pick<Keelson, "settings" | "cloudClients">,
  version: ApiVersion,
  input: ProviderInput,
): Promise<void> {
  if (input.type === LOCAL_TYPE) {
    throw badRequest("type", "the local provider takes no credentials to validate");
  }
  const type = checkProviderInput(version, input);
  await verifyWithCloud(keelson, type, input);
}

/** The decrypted credentials of an account, for the cloud calls; never for a response. */
export async function storedCredentials(keelson: Pick<Keelson, "db" | "cipher">, id: string): Promise<Credentials> {
  const row = firstRow(
    await keelson.db
      .select({ keyEnc: cloudProviders.keyEnc, secretEnc: cloudProviders.secretEnc })
      .from(cloudProviders)
      .where(eq(cloudProviders.id, id)),
  );
  if (!row?.keyEnc || !row.secretEnc) throw notFound("cloud provider credentials of", id);
  return { key: keelson.cipher.decrypt(row.keyEnc), secret: keelson.cipher.decrypt(row.secretEnc) };
}

async function requireUniqueName(tx: Tx, projectId: string, name: string, exceptId?: string): Promise<void> {
  const conditions = [eq(cloudProviders.projectId, projectId), eq(cloudProviders.name, name)];
  if (exceptId) conditions.push(ne(cloudProviders.id, exceptId));
  if (
    firstRow(
      await tx
        .select({ id: cloudProviders.id })
        .from(cloudProviders)
        .where(and(...conditions)),
    )
  ) {
    throw conflict(`a cloud provider named "${name}" already exists in this project`, "duplicate_name");
  }
}

/** Creates the account and its node pool in one transaction. */
export async function createProvider(
  keelson: Pick<Keelson, "db" | "cipher" | "settings" | "cloudClients">,
  projectId: string,
  version: ApiVersion,
  input: ProviderInput,
): Promise<ProviderRecord> {
  const type = checkProviderInput(version, input);
  // A duplicate name is answered before the cloud is asked, and checked again when writing.
  await requireUniqueName(keelson.db, projectId, input.name);
  await verifyWithCloud(keelson, type, input);
  return keelson.db.transaction(async (tx) => {
    await requireUniqueName(tx, projectId, input.name);
    const id = randomUUID();
    await tx.insert(cloudProviders).values({
      id,
      projectId,
      name: input.name,
      type,
      keyEnc: keelson.cipher.encrypt(input.key),
      secretEnc: keelson.cipher.encrypt(input.secret),
    });
    const nodePoolId = randomUUID();
    const nodePoolName = poolNameOf(input.name);
    await tx.insert(nodePools).values({ id: nodePoolId, projectId, cloudProviderId: id, name: nodePoolName });
    return { id, projectId, name: input.name, type, nodePoolId, nodePoolName };
  });
}

/** What still depends on the account; deleting it would orphan them (and the foreign keys refuse it). */
async function usersOf(tx: Tx, provider: ProviderRecord): Promise<string[]> {
  const users: string[] = [];
  const byProvider = eq(clusters.cloudProviderId, provider.id);
  const clusterRows = await tx
    .select({ name: clusters.name })
    .from(clusters)
    .where(provider.nodePoolId ? or(byProvider, eq(clusters.nodePoolId, provider.nodePoolId)) : byProvider);
  if (clusterRows.length > 0) users.push(`clusters ${clusterRows.map((c) => c.name).join(", ")}`);
  if (provider.nodePoolId) {
    const nodeRow = firstRow(
      await tx.select({ id: nodes.id }).from(nodes).where(eq(nodes.nodePoolId, provider.nodePoolId)),
    );
    if (nodeRow) users.push("nodes of its node pool");
  }
  const external = firstRow(
    await tx
      .select({ id: externalClusters.id })
      .from(externalClusters)
      .where(eq(externalClusters.cloudProviderId, provider.id)),
  );
  if (external) users.push("registered external clusters");
  return users;
}

export async function deleteProvider(db: Db, projectId: string, id: string): Promise<void> {
  await db.transaction(async (tx) => {
    const provider = await getProvider(tx, projectId, id);
    if (provider.type === LOCAL_TYPE) {
      throw conflict("the built-in local provider cannot be deleted", "builtin_provider");
    }
    const users = await usersOf(tx, provider);
    if (users.length > 0) {
      throw conflict(`cloud provider "${provider.name}" is in use by ${users.join("; ")}`, "provider_in_use");
    }
    // The node pool goes with it (ON DELETE CASCADE).
    await tx.delete(cloudProviders).where(eq(cloudProviders.id, id));
  });
}

/**
 * A re-key is checked with the cloud before anything changes: the new key or secret together
 * with the stored other half, as the account will use them.
 */
async function verifyNewCredentials(
  keelson: Pick<Keelson, "db" | "cipher" | "settings" | "cloudClients">,
  projectId: string,
  id: string,
  patch: ProviderPatch,
): Promise<void> {
  if (patch.key === undefined && patch.secret === undefined) return;
  const provider = await getProvider(keelson.db, projectId, id);
  if (provider.type === LOCAL_TYPE) return; // refused below, with the reason
  const type = provider.type as Exclude<ProviderType, "local">;
  checkCredentials(type, { key: patch.key, secret: patch.secret });
  const stored = await storedCredentials(keelson, id);
  await verifyWithCloud(keelson, type, {
    key: patch.key ?? stored.key,
    secret: patch.secret ?? stored.secret,
  });
}

/** Rename and/or re-key. Only the fields present change; the node pool follows a rename. */
export async function updateProvider(
  keelson: Pick<Keelson, "db" | "cipher" | "settings" | "cloudClients">,
  projectId: string,
  id: string,
  patch: ProviderPatch,
): Promise<void> {
  if (patch.name === undefined && patch.key === undefined && patch.secret === undefined) {
    throw badRequest("body", "give at least one of name, key, secret");
  }
  if (patch.name !== undefined) checkName(patch.name);
  await verifyNewCredentials(keelson, projectId, id, patch);
  await keelson.db.transaction(async (tx) => {
    const provider = await getProvider(tx, projectId, id);
    if (provider.type === LOCAL_TYPE) {
      throw conflict("the built-in local provider has no name or credentials to change", "builtin_provider");
    }
    checkCredentials(provider.type as Exclude<ProviderType, "local">, { key: patch.key, secret: patch.secret });
    const changes: Partial<typeof cloudProviders.$inferInsert> = {};
    if (patch.name !== undefined && patch.name !== provider.name) {
      await requireUniqueName(tx, projectId, patch.name, id);
      changes.name = patch.name;
    }
    if (patch.key !== undefined) changes.keyEnc = keelson.cipher.encrypt(patch.key);
    if (patch.secret !== undefined) changes.secretEnc = keelson.cipher.encrypt(patch.secret);
    if (Object.keys(changes).length === 0) return;
    await tx.update(cloudProviders).set(changes).where(eq(cloudProviders.id, id));
    if (changes.name !== undefined) {
      await tx
        .update(nodePools)
        .set({ name: poolNameOf(changes.name) })
        .where(eq(nodePools.cloudProviderId, id));
    }
  });
}
