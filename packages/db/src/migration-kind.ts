/**
 * Whether a migration is expand-only: whether the previous release can still run on the
 * database it leaves. Replicas are upgraded one at a time on one shared PostgreSQL database
 * (README "Upgrading replicas"), so while the first runs the new release and has migrated, the
 * others still run the old one on that schema, and a replica whose upgrade fails is switched
 * back onto it. An old binary keeps working when every table, column and constraint it uses is
 * still there with the same type, and every insert it makes still satisfies the schema.
 *
 * What breaks it (a contract): dropping or renaming a table or column, changing a column's
 * type, making a column NOT NULL, adding a NOT NULL column with no default (the old release's
 * inserts omit it), dropping an index (a unique one is a rule the old release relies on), and
 * SQLite's table rebuild (drizzle-kit's `__new_` copy, a drop and a rename). A release may
 * contract only when it also raises `keelson_schema.min_binary_version`, so the old binaries
 * refuse to start on it instead of failing at a query.
 */

export interface MigrationVerdict {
  expandOnly: boolean;
  /** Each contracting statement, shortened, with why. */
  contracts: string[];
  /** Whether it writes `min_binary_version` (a declared contract: older binaries refuse to start). */
  raisesMinBinary: boolean;
}

const RULES: [RegExp, string][] = [
  [/\bDROP\s+TABLE\b/i, "drops a table"],
  [/\bDROP\s+COLUMN\b/i, "drops a column"],
  [/\bRENAME\b/i, "renames a table or column"],
  [/\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b/i, "changes a column's type"],
  [/\bSET\s+NOT\s+NULL\b/i, "makes a column NOT NULL"],
  [/\bDROP\s+INDEX\b/i, "drops an index"],
  [/\bDROP\s+CONSTRAINT\b/i, "drops a constraint"],
];

/** drizzle-kit separates statements with this marker; a custom migration may use plain `;`. */
const statementsOf = (sql: string) =>
  sql
    .split(/--> statement-breakpoint|;\s*\n/)
    .map((s) => s.trim())
    .filter(Boolean);

const short = (statement: string) => statement.replace(/\s+/g, " ").slice(0, 120);

export function classifyMigration(sql: string): MigrationVerdict {
  const contracts: string[] = [];
  for (const statement of statementsOf(sql)) {
    for (const [rule, why] of RULES) if (rule.test(statement)) contracts.push(`${why}: ${short(statement)}`);
    // PostgreSQL writes ADD COLUMN, SQLite's drizzle-kit output ADD alone.
    const addsColumn = /\bALTER\s+TABLE\b.*\bADD\s+(?!CONSTRAINT\b)/is.test(statement);
    if (addsColumn && /\bNOT\s+NULL\b/i.test(statement) && !/\bDEFAULT\b/i.test(statement))
      contracts.push(`adds a NOT NULL column without a default: ${short(statement)}`);
  }
  const raisesMinBinary = /\bmin_binary_version\b/i.test(sql) && /\b(INSERT|UPDATE)\b/i.test(sql);
  return { expandOnly: contracts.length === 0, contracts, raisesMinBinary };
}
