import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../../../test/support/postgres.ts";
import { DatabaseUnavailableError, openStore, type PostgresStore, parseDatabaseUrl } from "../src/store/index.ts";

/**
 * TLS to PostgreSQL as libpq users write it: a server of its own with a certificate from a test
 * CA (real X.509, made with openssl), and a role that may log in only with a client certificate
 * over TLS (`hostssl … cert`).
 */

const dir = mkdtempSync(join(tmpdir(), "keelson-pg-tls-"));
const file = (name: string) => join(dir, name);
const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });

/** A CA, and a certificate it signs for `cn` (with `san` as subjectAltName when given). */
function makeCa(name: string): void {
  openssl(
    ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"],
    ...["-keyout", `${name}.key`, "-out", `${name}.crt`, "-subj", `/CN=keelson test ${name}`],
  );
}
function makeCert(name: string, ca: string, cn: string, extensions: string): void {
  writeFileSync(file(`${name}.ext`), `${extensions}\n`);
  openssl(
    ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
    ...["-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`],
  );
  openssl(
    ...["x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial"],
    ...["-days", "2", "-out", `${name}.crt`, "-extfile", `${name}.ext`],
  );
}

const CERT_USER = "keelson_cert";
let pg: PostgresServer;
let database: string;

beforeAll(async () => {
  makeCa("ca");
  makeCa("other-ca");
  makeCert("server", "ca", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth");
  makeCert("client", "ca", CERT_USER, "extendedKeyUsage=clientAuth");
  pg = await startPostgres({
    tls: { certFile: file("server.crt"), keyFile: file("server.key"), caFile: file("ca.crt"), certUsers: [CERT_USER] },
  });
  const admin = postgres(pg.adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin`create role ${admin(CERT_USER)} login`;
  } finally {
    await admin.end();
  }
  const url = new URL(await pg.createDatabase());
  database = url.pathname.slice(1);
  const owner = postgres(pg.adminUrl.replace(/\/postgres$/, `/${database}`), { max: 1, onnotice: () => {} });
  try {
    await owner`alter database ${owner(database)} owner to ${owner(CERT_USER)}`;
    await owner`alter schema public owner to ${owner(CERT_USER)}`;
  } finally {
    await owner.end();
  }
}, 60_000);

afterAll(async () => {
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function open(query: string) {
  return openStore({
    dialect: "postgres",
    target: parseDatabaseUrl(`postgres://${CERT_USER}@127.0.0.1:${pg.port}/${database}?${query}`),
    poolSize: 2,
    statementTimeoutMs: 10_000,
    connectTimeoutMs: 5_000,
    startTimeoutMs: 0,
    applicationName: "keelson-tls-test",
    binaryVersion: "0.1.0",
  });
}

describe("TLS and client certificates to PostgreSQL", () => {
  it("logs in with a client certificate over verify-full: no password, the session encrypted, the schema migrated", async () => {
    const store = (await open(
      `sslmode=verify-full&sslrootcert=${file("ca.crt")}&sslcert=${file("client.crt")}&sslkey=${file("client.key")}`,
    )) as PostgresStore;
    try {
      const [row] = await store.client`
        select current_user as who, ssl from pg_stat_ssl where pid = pg_backend_pid()`;
      expect(row).toEqual({ who: CERT_USER, ssl: true });
      const [tables] = await store.client`
        select count(*)::int as n from information_schema.tables where table_name = 'clusters'`;
      expect(tables?.n).toBe(1);
    } finally {
      await store.close();
    }
  });

  it("refuses a server whose certificate the given CA did not sign", async () => {
    const failure = await open(
      `sslmode=verify-full&sslrootcert=${file("other-ca.crt")}&sslcert=${file("client.crt")}&sslkey=${file("client.key")}`,
    ).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(DatabaseUnavailableError);
    expect((failure as Error).message).toMatch(/certificate/);
  });

  it("without the client certificate the server refuses the role, and says why", async () => {
    const failure = await open(`sslmode=verify-full&sslrootcert=${file("ca.crt")}`).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(DatabaseUnavailableError);
    expect(failure).toMatchObject({ code: "28000" });
    expect((failure as Error).message).toMatch(/certificate/);
  });

  it("sslmode=disable is refused for a certificate-only role", async () => {
    const failure = await open("sslmode=disable").catch((err: unknown) => err);
    expect(failure).toMatchObject({ code: "28000" });
    expect((failure as Error).message).toContain("pg_hba.conf rejects connection");
  });
});
