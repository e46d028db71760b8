import { createHash, randomUUID } from "node:crypto";
import { mkdir, open, rm } from "node:fs/promises";
import { join } from "node:path";
import { type Db, firstRow, storedPackageChunks, storedPackages } from "@keelson/db";
import { and, asc, eq } from "drizzle-orm";
import { ApiError } from "../../http/errors.ts";
import { writingDataDirAsync } from "../../storage/data-dir-files.ts";

/**
 * The shelves' packages in PostgreSQL (tables `stored_packages`, `stored_package_chunks`), where
 * several replicas serve the same shelves: an upload through any of them lands here, and one
 * whose data dir lacks a package fetches it from here (shelf.ts). Bytes move a chunk at a time,
 * both ways: a node package can be hundreds of MB, and no replica holds one whole in memory.
 */
export interface PackageRow {
  version: string;
  sha256: string;
  sizeBytes: number;
  storedAt: string;
  /** What the shelf keeps beside the bytes, as JSON (an image archive's image names); null for packages. */
  meta: string | null;
}

/** 1 MiB: a round trip per MiB, and a bytea value PostgreSQL stores out of line (the migration says so). */
export const CHUNK_BYTES = 1024 * 1024;

const columns = {
  id: storedPackages.id,
  version: storedPackages.version,
  sha256: storedPackages.sha256,
  sizeBytes: storedPackages.sizeBytes,
  storedAt: storedPackages.storedAt,
  meta: storedPackages.meta,
};

/** Fetches from the database under way, by the file they fill: two requests for one package fetch it once. */
const fetching = new Map<string, Promise<void>>();

export class ShelfDatabase {
  constructor(
    private readonly db: Db,
    /** The shelf's kind (its directory name: "agent", "node", "images"). */
    private readonly kind: string,
  ) {}

  /** The row of `version`, with the id its chunks carry. */
  async row(version: string): Promise<(PackageRow & { id: string }) | undefined> {
    return firstRow(await this.db.select(columns).from(storedPackages).where(this.versionIs(version)));
  }

  private versionIs(version: string) {
    return and(eq(storedPackages.kind, this.kind), eq(storedPackages.version, version));
  }

  /** Every package of this shelf, oldest first. */
  async rows(): Promise<PackageRow[]> {
    return this.db
      .select({
        version: storedPackages.version,
        sha256: storedPackages.sha256,
        sizeBytes: storedPackages.sizeBytes,
        storedAt: storedPackages.storedAt,
        meta: storedPackages.meta,
      })
      .from(storedPackages)
      .where(eq(storedPackages.kind, this.kind))
      .orderBy(asc(storedPackages.storedAt), asc(storedPackages.version));
  }

  /**
   * Stores the verified `file` as `version`, its row and every chunk in one transaction, unless
   * the version is stored already: the row that holds it, whoever wrote it. The unique key of
   * (kind, version) decides between replicas storing one version at once: the second waits at
   * the insert until the first commits, then finds its row. The caller compares the sha256.
   */
  async publish(version: string, sha256: string, file: string, meta: string | null = null): Promise<PackageRow> {
    const handle = await open(file, "r");
    try {
      const sizeBytes = (await handle.stat()).size;
      return await this.db.transaction(async (tx) => {
        const id = randomUUID();
        const taken = await tx
          .insert(storedPackages)
          .values({ id, kind: this.kind, version, sha256, sizeBytes, storedAt: new Date().toISOString(), meta })
          .onConflictDoNothing()
          .returning(columns);
        const mine = firstRow(taken);
        if (!mine) {
          const existing = firstRow(await tx.select(columns).from(storedPackages).where(this.versionIs(version)));
          if (!existing) throw new Error(`stored_packages: ${this.kind} ${version} was taken and is gone`);
          return existing;
        }
        for (let seq = 0, position = 0; position < sizeBytes; seq++) {
          // A fresh buffer each time: the driver may still be sending the previous one.
          const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, sizeBytes - position));
          const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
          if (bytesRead !== chunk.length) throw new Error(`${file} changed while it was stored`);
          await tx.insert(storedPackageChunks).values({ packageId: id, seq, data: chunk });
          position += bytesRead;
        }
        return mine;
      });
    } finally {
      await handle.close();
    }
  }

  /**
   * Fetches `version` into the data dir as `file` (in `dir`), unless a fetch of it is under way
   * already (then waits for that one): staged beside it, checked by copyTo, then handed to
   * `place` (which writes what goes beside it and renames the staged file to `file`). No space
   * is a DataDirFullError (507), and a failed fetch leaves no file. Nothing when the database
   * has no such version (the caller looked it up first).
   */
  async fetchOnce(
    version: string,
    dir: string,
    file: string,
    label: string,
    place: (staged: string, row: PackageRow) => Promise<void>,
  ): Promise<void> {
    let running = fetching.get(file);
    if (!running) {
      running = writingDataDirAsync(dir, async () => {
        const row = await this.row(version);
        if (!row) return;
        await mkdir(dir, { recursive: true });
        const staged = join(dir, `.fetch-${randomUUID()}`);
        try {
          await this.copyTo(row, staged, label);
          await place(staged, row);
        } finally {
          await rm(staged, { force: true });
        }
      }).finally(() => fetching.delete(file));
      fetching.set(file, running);
    }
    await running;
  }

  /**
   * Writes the stored bytes of `row` to `file`, a chunk at a time, and checks them against the
   * row's size and sha256: a damaged copy throws (the caller removes `file`), never passes.
   */
  async copyTo(row: PackageRow & { id: string }, file: string, label: string): Promise<void> {
    const out = await open(file, "wx");
    const hash = createHash("sha256");
    let size = 0;
    try {
      for (let seq = 0; ; seq++) {
        const chunk = firstRow(
          await this.db
            .select({ data: storedPackageChunks.data })
            .from(storedPackageChunks)
            .where(and(eq(storedPackageChunks.packageId, row.id), eq(storedPackageChunks.seq, seq))),
        );
        if (!chunk) break;
        hash.update(chunk.data);
        size += chunk.data.length;
        await out.write(chunk.data);
      }
    } finally {
      await out.close();
    }
    const sha256 = hash.digest("hex");
    if (size !== row.sizeBytes || sha256 !== row.sha256) {
      throw new ApiError(
        500,
        "package_damaged",
        `the database's copy of ${label} ${row.version} is damaged (${size} bytes with sha256 ${sha256}, ` +
          `stored as ${row.sizeBytes} bytes with sha256 ${row.sha256}); it is not served here, and replicas ` +
          "that hold it in their data dir still serve their checked copy",
      );
    }
  }
}
