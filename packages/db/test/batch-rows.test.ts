import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, rowsOf, type Store } from "../src/store/index.ts";
import { optionsFor } from "./store-options.ts";

/** Strings a text or JSON parameter must carry byte for byte, whatever the encoding on the way. */
const AWKWARD = [
  "",
  " leading and trailing ",
  "quotes \" and 'single'",
  "back\\slash \\\\ and \\n written out",
  "commas, {braces}, [brackets], (parens)",
  "NULL",
  "null",
  '{"a":1}',
  "ümlaut, 日本語, emoji 🚀",
  "line\nbreak\ttab\r\u0001control",
  "$1 ::text -- ; drop table nodes",
];

const FIELDS = {
  r_text: { key: "t", type: "text" },
  r_int: { key: "i", type: "integer" },
  r_json: { key: "j", type: "json" },
} as const;

describe.each(["sqlite", "postgres"] as const)("rowsOf on %s", (dialect) => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(await optionsFor(dialect));
  });
  afterAll(() => store?.close());

  const readBack = (rows: Record<string, unknown>[]) =>
    store.db
      .select({
        text: sql<string | null>`r_text`,
        int: sql<number | null>`r_int`,
        json: sql<string | null>`r_json`,
      })
      .from(sql`${rowsOf(rows, FIELDS)} as r`);

  it("reads back every string exactly, in a text field and inside a JSON document, with NULLs as NULL", async () => {
    const rows = AWKWARD.map((t, i) => ({ t, i: i - 3, j: { t, list: [t, null], n: i } }));
    expect(await readBack(rows)).toEqual(rows.map(({ t, i, j }) => ({ text: t, int: i, json: JSON.stringify(j) })));
    expect(await readBack([{ t: null, i: null, j: null }, {}])).toEqual([
      { text: null, int: null, json: "null" },
      { text: null, int: null, json: null },
    ]);
  });

  it("gives exactly the rows given, in their order, for batch sizes around the padding", async () => {
    for (const n of [1, 2, 3, 4, 5, 63, 64, 65, 1000]) {
      const rows = Array.from({ length: n }, (_, i) => ({ t: `row ${i}`, i, j: [i] }));
      const back = await readBack(rows);
      expect(back.map((r) => r.int)).toEqual(rows.map((r) => r.i));
      expect(back.map((r) => r.text)).toEqual(rows.map((r) => r.t));
    }
  });
});

describe("rowsOf's statement text", () => {
  it("is one text for every batch size up to the same power of two, so its prepared statement is reused", () => {
    const dialect = new PgDialect();
    const text = (n: number) =>
      dialect.sqlToQuery(
        rowsOf(
          Array.from({ length: n }, () => ({ t: "x" })),
          FIELDS,
        ),
      ).sql;
    expect(text(5)).toBe(text(8));
    expect(text(9)).not.toBe(text(8));
    expect(text(1)).not.toBe(text(2));
  });

  it("refuses a batch whose padded list would pass the parameters one statement may have", () => {
    const rows = (n: number) => Array.from({ length: n }, () => ({}));
    expect(() => rowsOf(rows(8_192), FIELDS)).not.toThrow();
    expect(() => rowsOf(rows(8_193), FIELDS)).toThrow(/8193 rows of 3 fields exceed/);
  });
});
