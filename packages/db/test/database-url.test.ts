import { describe, expect, it } from "vitest";
import { checkDatabaseUrl, parseDatabaseUrl } from "../src/store/database-url.ts";

const files: Record<string, string> = { "/ca.pem": "CA", "/client.pem": "CERT", "/client.key": "KEY" };
const readFile = (path: string) => {
  const content = files[path];
  if (content === undefined) throw new Error(`ENOENT: ${path}`);
  return Buffer.from(content);
};

describe("the database URL", () => {
  it.each([
    ["mysql://db/keelson", "must start with postgres:// or postgresql://"],
    ["postgres:///keelson", "must name a host"],
    ["not a url", "is not a URL"],
    [
      "postgres://db/keelson?sslmode=required",
      'sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full (got "required")',
    ],
  ])("refuses %s: %s", (url, rule) => {
    expect(checkDatabaseUrl(url)).toBe(rule);
    expect(() => parseDatabaseUrl(url, readFile)).toThrow(`the database URL ${rule}`);
  });

  it("never repeats the password in what it shows", () => {
    const target = parseDatabaseUrl("postgresql://keelson:s3cret@db.internal:6432/cp", readFile);
    expect(target).toMatchObject({ host: "db.internal", port: 6432, database: "cp", user: "keelson", ssl: "prefer" });
    expect(target.display).toBe("keelson@db.internal:6432/cp");
    expect(checkDatabaseUrl("postgresql://keelson:s3cret@db.internal:6432/cp?sslmode=nope")).not.toContain("s3cret");
  });

  it("defaults as libpq does: port 5432, the user's own database, sslmode prefer", () => {
    expect(parseDatabaseUrl("postgres://ops@db", readFile)).toMatchObject({
      port: 5432,
      database: "ops",
      ssl: "prefer",
    });
  });

  it("turns libpq's TLS parameters into TLS options and takes them out of the URL", () => {
    const full = parseDatabaseUrl(
      "postgres://k@db/cp?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/client.pem&sslkey=/client.key&application_name=x",
      readFile,
    );
    expect(full.ssl).toEqual({
      ca: Buffer.from("CA"),
      cert: Buffer.from("CERT"),
      key: Buffer.from("KEY"),
      rejectUnauthorized: true,
      servername: "db",
      checkServerIdentity: expect.any(Function),
    });
    // verify-full checks the certificate against the URL's host (store-tls.test.ts: a real one).
    const identity = (full.ssl as { checkServerIdentity: (h: string, c: object) => Error | undefined })
      .checkServerIdentity;
    expect(identity("localhost", { subject: { CN: "db" }, subjectaltname: "DNS:db" })).toBeUndefined();
    expect(identity("db", { subject: { CN: "other" }, subjectaltname: "DNS:other" })).toBeInstanceOf(Error);
    expect(full.url).toBe("postgres://k@db/cp?application_name=x");
    const ca = parseDatabaseUrl("postgres://k@db/cp?sslmode=verify-ca&sslrootcert=/ca.pem", readFile).ssl;
    expect(ca).toMatchObject({ ca: Buffer.from("CA"), rejectUnauthorized: true });
    expect(typeof (ca as { checkServerIdentity?: unknown }).checkServerIdentity).toBe("function");
    // require with a root certificate verifies the chain, as libpq does.
    expect(parseDatabaseUrl("postgres://k@db/cp?sslmode=require&sslrootcert=/ca.pem", readFile).ssl).toMatchObject({
      rejectUnauthorized: true,
    });
    expect(parseDatabaseUrl("postgres://k@db/cp?sslmode=require", readFile).ssl).toMatchObject({
      rejectUnauthorized: false,
    });
    expect(parseDatabaseUrl("postgres://k@db/cp?sslmode=disable", readFile).ssl).toBe(false);
  });

  it("names a certificate file it cannot read", () => {
    expect(() => parseDatabaseUrl("postgres://k@db/cp?sslmode=verify-full&sslrootcert=/missing.pem", readFile)).toThrow(
      "ENOENT: /missing.pem",
    );
  });
});
