import { type SQL, sql } from "drizzle-orm";

/** How a field's values are passed and read back (see rowsOf). */
export type FieldType = "text" | "integer" | "json";

/** A field of rowsOf's subquery: `key` names it in each row given, the subquery's column is named by its entry. */
export interface Field {
  key: string;
  type: FieldType;
}

/** Parameters of one statement at most: SQLite's default limit (PostgreSQL's is 65,535). */
const MAX_PARAMETERS = 32_766;

/**
 * The rows given as a subquery, one column per field (its entry's name, so it never collides
 * with a column of the table being written), in the order given: what a statement that writes
 * a batch joins or selects from. A text field reads back exactly the string put in (null: SQL
 * NULL); an integer field is an integer; a json field is the value's JSON text (for a text
 * column holding JSON).
 *
 * The rows are a VALUES list with a parameter per field and row, each a plain text or integer,
 * so neither database parses them as JSON. Passed as one JSON document (`json_to_recordset`,
 * `json_each`), a batch of node reports cost PostgreSQL about twice the CPU, most of it parsing
 * each report's 4 KB phase list and printing it again as text, and SQLite a quarter more; one
 * array parameter per column (`unnest`) costs PostgreSQL more than VALUES, each quote of those
 * phase lists escaped by the client and unescaped by the server (figures in the commits that
 * made this). So that the statement's text, which postgres.js prepares once per text and
 * connection, does not change with every batch size, the list is padded with NULL rows to the
 * next power of two and a `limit` keeps the rows given: eleven texts for up to 1,024 rows.
 */
export function rowsOf(rows: readonly Record<string, unknown>[], fields: Record<string, Field>): SQL {
  const entries = Object.entries(fields);
  const size = 2 ** Math.ceil(Math.log2(Math.max(rows.length, 1)));
  if (size * entries.length > MAX_PARAMETERS)
    throw new Error(`rowsOf: ${rows.length} rows of ${entries.length} fields exceed one statement's parameters`);
  // Each row an array: drizzle writes an array as a parenthesized list of parameters, far
  // cheaper to build than a template per value (a 1,000-row batch: 17 ms against 45).
  const list = Array.from({ length: size }, (_, i) => {
    const row = rows[i];
    return entries.map(([, { key, type }]) => parameter(row?.[key], type));
  });
  // Both dialects name a VALUES list's columns column1, column2…; its untyped parameters are
  // text on PostgreSQL, so integers are cast.
  const columns = entries.map(([as, { type }], f) => {
    const column = sql.identifier(`column${f + 1}`);
    return type === "integer"
      ? sql`cast(${column} as integer) as ${sql.identifier(as)}`
      : sql`${column} as ${sql.identifier(as)}`;
  });
  return sql`(select ${sql.join(columns, sql`, `)} from (values ${sql.join(list, sql`, `)}) as v limit ${rows.length})`;
}

/** A field's value as its parameter: absent is NULL; a json field's null is the text `null`. */
function parameter(value: unknown, type: FieldType): unknown {
  if (value === undefined) return null;
  return type === "json" ? JSON.stringify(value) : value;
}
