import { type Db, firstRow, sharedSecrets } from "@keelson/db";
import { SettingsError } from "@keelson/settings";
import { and, eq } from "drizzle-orm";
import { readIfExists, writeFileAtomic } from "../storage/data-dir-files.ts";
import type { SecretCipher } from "./cipher.ts";

/** The setting whose file holds the key that seals the shared secrets. */
export const SECRETS_KEY_SETTING = "KEELSON_SECRETS_KEY_FILE";

/** A secret's copy in the data dir: one file (0600), or several (the TLS CA's certificate and key). */
export interface LocalCopy {
  /** For messages: the file. */
  where: string;
  read(): string | undefined;
  write(value: string): void;
}

/** A secret kept as one file of the data dir, 0600. */
export function fileCopy(file: string): LocalCopy {
  return {
    where: file,
    read: () => readIfExists(file)?.trim() || undefined,
    write: (value) => writeFileAtomic(file, `${value}\n`, 0o600),
  };
}

/** One secret every replica on PostgreSQL shares (a row of `shared_secrets`). */
export interface SharedSecretSpec {
  /** Its row's name. */
  name: string;
  /**
   * Its copy in the data dir: an install from before the database held it (SQLite copied with
   * `migrate-to-postgres`) has it there, and the first start with the key adopts it; afterwards
   * each replica keeps a copy there, as on SQLite.
   */
  local: LocalCopy;
  /** A new value, for a database that has none and a data dir without the copy. */
  generate(): string | Promise<string>;
  /**
   * The value may change (the admin token's rotation): a file that differs is an old copy and is
   * rewritten. Otherwise a file that differs from the database's refuses the start: it would be a
   * second key, and what it sealed could not be read on the other replicas.
   */
  changes?: boolean;
  /**
   * Whether the data dir's copy is the operator's deliberate successor of the database's value
   * (the TLS CA's promote step, README "Rotating the CA"): it then replaces the database's.
   */
  succeeds?(local: string, shared: string): boolean;
}

/**
 * The database's value of `spec`, created on the first start: the data dir's file if there is one,
 * else a new one. An insert-if-absent, so of replicas starting at once on an empty database the
 * first row wins and every replica reads that one; never a value of this replica's own. Throws
 * SettingsError (exit 78) when the key does not open the row or a file contradicts it.
 */
export async function sharedSecret(db: Db, sealing: SecretCipher, spec: SharedSecretSpec): Promise<string> {
  const local = spec.local.read();
  let row = await readRow(db, spec.name);
  if (!row) {
    await db
      .insert(sharedSecrets)
      .values({
        name: spec.name,
        sealed: sealing.encrypt(local ?? (await spec.generate())),
        createdAt: new Date().toISOString(),
      })
      .onConflictDoNothing();
    row = await readRow(db, spec.name);
    if (!row) throw new Error(`the shared secret ${spec.name} was inserted but cannot be read back`);
  }
  const value = unseal(sealing, spec.name, row.sealed);
  if (local !== undefined && local !== value && spec.succeeds?.(local, value)) {
    await replaceSharedSecret(db, sealing, spec, local);
    return local;
  }
  if (local !== undefined && local !== value && !spec.changes) {
    throw new SettingsError(
      `${spec.local.where} differs from the ${spec.name} the replicas share in the database: it is another key, and what it ` +
        "sealed cannot be read on the other replicas. Remove the file (this replica then uses the database's), " +
        "or if this data dir's key is the right one, start its replica first on an empty shared_secrets table",
    );
  }
  if (local !== value) spec.local.write(value);
  return value;
}

/** A new value of a secret that changes (the admin token's rotation), and the data-dir copy. */
export async function replaceSharedSecret(
  db: Db,
  sealing: SecretCipher,
  spec: Pick<SharedSecretSpec, "name" | "local">,
  value: string,
): Promise<void> {
  await db
    .update(sharedSecrets)
    .set({ sealed: sealing.encrypt(value) })
    .where(eq(sharedSecrets.name, spec.name));
  spec.local.write(value);
}

/**
 * Replaces the database's value of a secret with `fresh` if it still is `stale`, and answers the
 * value it holds then (rewriting the data-dir copy): of replicas renewing at once, one writes and
 * every one gets its value (the sealed text is random, so comparing it is a compare-and-set).
 */
export async function renewSharedSecret(
  db: Db,
  sealing: SecretCipher,
  spec: Pick<SharedSecretSpec, "name" | "local">,
  stale: string,
  fresh: string,
): Promise<string> {
  const row = await readRow(db, spec.name);
  if (row && unseal(sealing, spec.name, row.sealed) === stale) {
    await db
      .update(sharedSecrets)
      .set({ sealed: sealing.encrypt(fresh) })
      .where(and(eq(sharedSecrets.name, spec.name), eq(sharedSecrets.sealed, row.sealed)));
  }
  const now = await readSharedSecret(db, sealing, spec.name);
  if (now === undefined) throw new Error(`the shared secret ${spec.name} is gone`);
  spec.local.write(now);
  return now;
}

/** The database's value of a secret now, or undefined when it has none (the admin token's refresh). */
export async function readSharedSecret(db: Db, sealing: SecretCipher, name: string): Promise<string | undefined> {
  const row = await readRow(db, name);
  return row ? unseal(sealing, name, row.sealed) : undefined;
}

async function readRow(db: Db, name: string) {
  return firstRow(
    await db.select({ sealed: sharedSecrets.sealed }).from(sharedSecrets).where(eq(sharedSecrets.name, name)),
  );
}

function unseal(sealing: SecretCipher, name: string, sealed: string): string {
  try {
    return sealing.decrypt(sealed);
  } catch {
    throw new SettingsError(
      `${SECRETS_KEY_SETTING}: this key does not open the database's ${name}, which another key sealed: ` +
        "give every replica the same key file",
    );
  }
}
