/**
 * The tests' PostgreSQL server is a real one (test/support/postgres.ts): fresh databases that
 * store rows and share nothing, loopback only, password authentication, nothing left behind.
 */
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { dirname } from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, inject, it } from "vitest";
import { startPostgres } from "../support/postgres.ts";
import { freshDatabaseUrl } from "../support/postgres-database.ts";

const clients: postgres.Sql[] = [];
afterAll(() => Promise.all(clients.map((sql) => sql.end())));

function client(url: string): postgres.Sql {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  clients.push(sql);
  return sql;
}

function tcpConnect(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
    socket.once("error", reject);
  });
}

describe("the test run's PostgreSQL server", () => {
  it("gives a fresh database that creates a table, inserts and selects", async () => {
    const url = new URL(await freshDatabaseUrl());
    expect([url.protocol, url.username, url.hostname]).toEqual(["postgres:", "keelson", "127.0.0.1"]);
    const sql = client(url.toString());
    await sql`create table items (id integer primary key, name text not null)`;
    await sql`insert into items ${sql([
      { id: 2, name: "two" },
      { id: 1, name: "one" },
    ])}`;
    expect([...(await sql`select id, name from items order by id`)]).toEqual([
      { id: 1, name: "one" },
      { id: 2, name: "two" },
    ]);
    const [db] = await sql`select current_database() as name`;
    expect(`/${db?.name}`).toBe(url.pathname);
  });

  it("gives distinct databases: a table in one is absent in the other", async () => {
    const [a, b] = await Promise.all([freshDatabaseUrl(), freshDatabaseUrl()]);
    expect(a).not.toBe(b);
    const [inA, inB] = [client(a), client(b)];
    await inA`create table marker (id integer)`;
    const present = async (sql: postgres.Sql) => (await sql`select to_regclass('marker') is not null as p`)[0]?.p;
    expect(await present(inA)).toBe(true);
    expect(await present(inB)).toBe(false);
  });

  it("listens on 127.0.0.1 only", async () => {
    const { adminUrl } = inject("postgres");
    const [row] = await client(adminUrl)`show listen_addresses`;
    expect(row?.listen_addresses).toBe("127.0.0.1");
    const port = Number(new URL(adminUrl).port);
    await expect(tcpConnect("127.0.0.1", port)).resolves.toBeUndefined();
    // Another loopback address, same port: a server listening on every address would answer.
    await expect(tcpConnect("127.0.0.2", port)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("refuses a wrong password with 28P01", async () => {
    const url = new URL(inject("postgres").adminUrl);
    url.password = "not-the-password";
    await expect(client(url.toString())`select 1`).rejects.toMatchObject({ code: "28P01" });
  });
});

describe("a server of its own", () => {
  it("creates and drops databases, and once stopped leaves neither a listener nor its directory", async () => {
    const server = await startPostgres();
    let dataDirectory: string | undefined;
    try {
      const url = await server.createDatabase("own");
      expect(new URL(url).pathname).toBe("/own");
      const sql = client(url);
      dataDirectory = (await sql`show data_directory`)[0]?.data_directory;
      await server.dropDatabase("own");
      await expect(client(url)`select 1`).rejects.toMatchObject({ code: "3D000" }); // invalid_catalog_name
    } finally {
      await server.stop();
    }
    expect(dataDirectory).toMatch(/keelson-pg-/);
    expect(existsSync(dirname(dataDirectory as string))).toBe(false);
    await expect(tcpConnect("127.0.0.1", server.port)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });
});
