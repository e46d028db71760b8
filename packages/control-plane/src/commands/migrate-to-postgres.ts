import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  type CopyProgress,
  copySqliteToPostgres,
  openSqliteConnection,
  openStore,
  type PostgresStore,
  type TableCopy,
} from "@keelson/db";
import { databaseLabel, storeOptions } from "../database.ts";
import type { ServerSettings } from "../settings.ts";
import { SERVER_VERSION } from "../version.ts";

/**
 * `keelson-server migrate-to-postgres`: copies a stopped control plane's SQLite database (the
 * data dir's keelson.sqlite) into the empty PostgreSQL database KEELSON_DATABASE_URL names.
 * Both sides are migrated to this binary's schema first; the copy is one transaction; each
 * table's rows are counted and checksummed on both sides at the end. The data dir's secrets are
 * not in the database: the README's move carries them.
 */

export class MigrateRefused extends Error {
  override name = "MigrateRefused";
}

export interface MigrateOutput {
  progress(p: CopyProgress): void;
  line(text: string): void;
}

/** What an operator watching the copy sees: one line per table, redrawn in place on a terminal. */
export function terminalOutput(stream: NodeJS.WriteStream): MigrateOutput {
  let drawn = "";
  return {
    progress({ table, copied, total }) {
      const text = `  copying ${table}: ${copied}/${total} rows`;
      if (stream.isTTY) {
        stream.write(`\r${text.padEnd(drawn.length)}`);
        drawn = text;
        if (copied === total) {
          stream.write("\n");
          drawn = "";
        }
      } else if (copied === total) stream.write(`${text}\n`);
    },
    line(text) {
      stream.write(`${text}\n`);
    },
  };
}

function report(copies: TableCopy[]): { text: string; ok: boolean } {
  const rows = copies.map((c) => {
    const same = c.rows === c.copiedRows && c.sourceChecksum === c.targetChecksum;
    return { ...c, same };
  });
  const width = Math.max(...rows.map((r) => r.table.length), 5);
  const lines = [
    `  ${"table".padEnd(width)}  ${"sqlite".padStart(8)}  ${"postgres".padStart(8)}  checksum (sha256)`,
    ...rows.map(
      (r) =>
        `  ${r.table.padEnd(width)}  ${String(r.rows).padStart(8)}  ${String(r.copiedRows).padStart(8)}  ` +
        `${r.sourceChecksum.slice(0, 16)} ${r.same ? "same" : `DIFFERS (postgres ${r.targetChecksum.slice(0, 16)})`}`,
    ),
  ];
  return { text: lines.join("\n"), ok: rows.every((r) => r.same) };
}

/** Runs the move; resolves with the exit code. Throws MigrateRefused for what the operator must change. */
export async function migrateToPostgres(settings: ServerSettings, out: MigrateOutput): Promise<number> {
  if (!settings.databaseUrl) {
    throw new MigrateRefused(
      "set KEELSON_DATABASE_URL (or --database-url) to the empty PostgreSQL database to copy into",
    );
  }
  const file = join(settings.dataDir, "keelson.sqlite");
  if (!existsSync(file))
    throw new MigrateRefused(`no SQLite database at ${file} (KEELSON_DATA_DIR names the data dir)`);
  // A server that runs (or did not stop cleanly) has its latest writes in the WAL.
  const wal = `${file}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) {
    throw new MigrateRefused(
      `${wal} is not empty: keelson-server is running on this data dir or did not stop cleanly; stop it (or start and stop it once) and run this again`,
    );
  }

  out.line(`keelson-server ${SERVER_VERSION}: copying ${file}`);
  // Both sides at this binary's schema: the SQLite file as a start of this binary would leave it.
  await (await openStore({ dialect: "sqlite", file, binaryVersion: SERVER_VERSION })).close();
  const target = (await openStore(storeOptions(settings))) as PostgresStore;
  const source = openSqliteConnection(file);
  try {
    out.line(`  into ${databaseLabel(settings)}`);
    const copies = await copySqliteToPostgres(source, target.client, (p) => out.progress(p));
    const { text, ok } = report(copies);
    out.line(text);
    if (!ok) {
      out.line(
        "the copy differs from the source: do not start keelson-server on it; drop the target database's tables and run this again",
      );
      return 1;
    }
    const rows = copies.reduce((n, c) => n + c.rows, 0);
    out.line(`copied ${rows} rows in ${copies.length} tables; every count and checksum is the same on both sides.`);
    out.line(
      "next: carry the data dir's secrets (secret.key, webcli.key, admin-token) to every host that runs keelson-server, then start it with KEELSON_DATABASE_URL set (README: Moving from SQLite to PostgreSQL).",
    );
    return 0;
  } finally {
    source.close();
    await target.close();
  }
}
