import { type SQL, sql } from "drizzle-orm";
import type { Dialect } from "./types.ts";

/** How a field's values are passed and read back (see rowsOf). */
export type FieldType = "text" | "integer" | "json";

/** A field of rowsOf's subquery: `key` names it in each row given, the subquery's column is named by its entry. */
export interface Field {
  key: string;
  type: FieldType;
}

/** PostgreSQL's limit on one statement's parameters (the protocol counts them in 16 bits). */
const MAX_PARAMETERS = 65_535;

/**
 * The rows given as a subquery, one column per field (its entry's name, so it never collides
 * with a column of the table being written), in the order given: what a statement that writes
 * a batch joins or selects from. A text field reads back exactly the string put in (null: SQL
 * NULL); an integer field is an integer; a json field is the value's JSON text (for a text
 * column holding JSON).
 *
 * On SQLite the rows are one JSON parameter read by `json_each`, the same statement text for
 * any number of rows, compiled once.
 *
 * On PostgreSQL they are a VALUES list with a parameter per field and row, each a plain text or
 * integer value: the server never parses them as JSON. Passed as one JSON document
 * (`json_to_recordset`), a batch of node reports cost PostgreSQL about twice as much CPU, most
 * of it parsing each report's 4 KB phase list and printing it again as text; one array
 * parameter per column (`unnest`) costs more than VALUES on both sides of the socket, each
 * quote of those phase lists escaped by the client and unescaped by the server (figures in
 * the commit that made this). So that the statement's text, which
 * postgres.js prepares once per text and connection, does not change with every batch size,
 * the list is padded with NULL rows to the next power of two and a `limit` keeps the rows given:
 * eleven texts for up to 1,024 rows.
 */
export function rowsOf(dialect: Dialect, rows: readonly Record<string, unknown>[], fields: Record<string, Field>): SQL {
  const entries = Object.entries(fields);
  if (dialect === "sqlite") {
    const columns = entries.map(([as, { key, type }]) => {
      const quoted = `'${key.replace(/'/g, "''")}'`;
      const value =
        type === "integer"
          ? sql.raw(`cast(value->>${quoted} as integer)`)
          : type === "json"
            ? sql.raw(`value->${quoted}`)
            : sql.raw(`value->>${quoted}`);
      return sql`${value} as ${sql.identifier(as)}`;
    });
    return sql`(select ${sql.join(columns, sql`, `)} from json_each(${JSON.stringify(rows)}))`;
  }
  const size = 2 ** Math.ceil(Math.log2(Math.max(rows.length, 1)));
  if (size * entries.length > MAX_PARAMETERS)
    throw new Error(`rowsOf: ${rows.length} rows of ${entries.length} fields exceed one statement's parameters`);
  const casts = entries.map(([, { type }]) => (type === "integer" ? sql.raw("::integer") : sql.raw("::text")));
  const list = Array.from({ length: size }, (_, i) => {
    const row = rows[i];
    const values = entries.map(([, { key, type }], f) => sql`${parameter(row?.[key], type)}${casts[f]}`);
    return sql`(${sql.join(values, sql`, `)})`;
  });
  const names = entries.map(([as]) => sql.identifier(as));
  return sql`(select * from (values ${sql.join(list, sql`, `)}) as v(${sql.join(names, sql`, `)}) limit ${rows.length})`;
}

/** A field's value as its parameter: absent is NULL; a json field's null is the text `null`, as SQLite's `->` reads it. */
function parameter(value: unknown, type: FieldType): unknown {
  if (value === undefined) return null;
  return type === "json" ? JSON.stringify(value) : value;
}
