import { randomBytes, X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Store, sharedSecrets } from "@keelson/db";
import { caCertHash, splitPemCertificates } from "@keelson/protocol";
import { SettingsError } from "@keelson/settings";
import { afterEach, describe, expect, it } from "vitest";
import { dropDatabaseFor } from "../../../test/support/postgres-database.ts";
import { verifyWebCliToken } from "../src/domain/webcli/tokens.ts";
import { issueWebCliSession } from "../src/domain/webcli/webcli.ts";
import type { ClusterCa } from "../src/pki/cluster-ca.ts";
import { loadSecretCipher } from "../src/secrets/cipher.ts";
import { loadServerSecrets, type ServerSecrets } from "../src/secrets/server-secrets.ts";
import { defaultServerSettings } from "../src/settings.ts";
import { caFiles, newControlPlaneCa } from "../src/tls/ca-files.ts";
import { prepareServerTls } from "../src/tls/server-tls.ts";
import { createTestApp, openTestStore, TEST_DIALECT } from "./helpers.ts";
import { insertCluster } from "./node-fixtures.ts";

/**
 * The secrets replicas share (issue 17, "Shared secrets"): on PostgreSQL in the database, sealed
 * by KEELSON_SECRETS_KEY_FILE's key, each replica with its own data dir; on SQLite the data dir's
 * files, as before.
 */

const dirs: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) {
    await dropDatabaseFor(d);
    rmSync(d, { recursive: true, force: true });
  }
});

function dir(prefix = "keelson-secrets-"): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

function keyFile(): string {
  const file = join(dir(), "secrets.key");
  writeFileSync(file, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
  return file;
}

/** A store on the database of `databaseDir` (one database per such dir), closed after the test. */
async function storeOf(databaseDir: string): Promise<Store> {
  const store = await openTestStore(databaseDir);
  stores.push(store);
  return store;
}

/** The secrets of a replica with its own (empty unless given) data dir on the database of `databaseDir`. */
async function replica(
  databaseDir: string,
  secretsKeyFile: string | undefined,
  dataDir = dir(),
): Promise<ServerSecrets> {
  return loadServerSecrets(await storeOf(databaseDir), { dataDir, secretsKeyFile, adminToken: undefined });
}

async function refusal(start: Promise<unknown>): Promise<SettingsError> {
  const err = await start.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SettingsError);
  return err as SettingsError;
}

if (TEST_DIALECT === "sqlite") {
  describe("secrets on SQLite (one server)", () => {
    it("are the data dir's files, created on first start and read after; the key setting is not needed and no row is written", async () => {
      const data = dir();
      const first = await replica(data, undefined, data);
      for (const name of ["secret.key", "webcli.key", "admin-token"]) {
        expect(statSync(join(data, name)).mode & 0o777).toBe(0o600);
      }
      expect(readFileSync(join(data, "admin-token"), "utf8").trim()).toBe(first.admin.token);
      const again = await replica(data, undefined, data);
      expect(again.admin.token).toBe(first.admin.token);
      expect(again.webcliKey.equals(first.webcliKey)).toBe(true);
      expect(loadSecretCipher(data).decrypt(first.cipher.encrypt("aws-secret"))).toBe("aws-secret");
      expect(first.currentAdminToken).toBeUndefined();
      expect(await (await storeOf(data)).db.select().from(sharedSecrets)).toEqual([]);
    });
  });
} else {
  describe("secrets shared on PostgreSQL", () => {
    it("replicas starting at once on an empty database agree on every secret; each keeps a 0600 copy", async () => {
      const database = dir();
      const key = keyFile();
      await storeOf(database); // the test's database made once, before the replicas race
      const [a, b, c] = await Promise.all([replica(database, key), replica(database, key), replica(database, key)]);
      for (const other of [b, c]) {
        expect(other.admin.token).toBe(a.admin.token);
        expect(other.webcliKey.equals(a.webcliKey)).toBe(true);
        expect(other.cipher.decrypt(a.cipher.encrypt("sealed on A"))).toBe("sealed on A");
      }
      expect(a.admin.token).toMatch(/^kadm_/);
      const file = a.admin.file as string;
      expect(readFileSync(file, "utf8")).toBe(`${a.admin.token}\n`);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const rows = await (await storeOf(database)).db.select().from(sharedSecrets);
      expect(rows.map((r) => r.name).sort()).toEqual(["admin-token", "secret-key", "webcli-key"]);
      // Sealed: no value is in the database in clear.
      for (const r of rows) expect(r.sealed).not.toContain(a.admin.token);
    });

    it("refuses to start without the key, naming the setting, and writes nothing", async () => {
      const database = dir();
      const data = dir();
      const err = await refusal(replica(database, undefined, data));
      expect(err.message).toMatch(/^KEELSON_SECRETS_KEY_FILE is required on PostgreSQL/);
      expect(await (await storeOf(database)).db.select().from(sharedSecrets)).toEqual([]);
      expect(existsSync(join(data, "secret.key"))).toBe(false);
    });

    it("refuses a key that is not 32 bytes, and another key than the one that sealed the secrets", async () => {
      const database = dir();
      const short = join(dir(), "short.key");
      writeFileSync(short, "c2hvcnQ=\n");
      expect((await refusal(replica(database, short))).message).toBe(
        `KEELSON_SECRETS_KEY_FILE: ${short} must hold 32 bytes in base64 on its first line (\`openssl rand -base64 32\`), got 5 bytes`,
      );
      expect((await refusal(replica(database, join(dir(), "absent.key")))).message).toMatch(
        /^KEELSON_SECRETS_KEY_FILE: no file .*absent\.key$/,
      );
      await replica(database, keyFile());
      expect((await refusal(replica(database, keyFile()))).message).toMatch(
        /^KEELSON_SECRETS_KEY_FILE: this key does not open the database's secret-key, which another key sealed/,
      );
    });

    it("adopts an existing install's files on the first start with the key; a data dir with another key is refused", async () => {
      const database = dir();
      const key = keyFile();
      const old = dir();
      const oldCipher = loadSecretCipher(old);
      const sealedBefore = oldCipher.encrypt("credential sealed before the move");
      writeFileSync(join(old, "admin-token"), "kadm_from_before\n", { mode: 0o600 });
      const adopted = await replica(database, key, old);
      expect(adopted.admin.token).toBe("kadm_from_before");
      const fresh = await replica(database, key);
      expect(fresh.cipher.decrypt(sealedBefore)).toBe("credential sealed before the move");
      expect(fresh.admin.token).toBe("kadm_from_before");

      const stray = dir();
      loadSecretCipher(stray);
      const err = await refusal(replica(database, key, stray));
      expect(err.message).toContain(`${join(stray, "secret.key")} differs from the secret-key the replicas share`);
    });

    it("a rotation on one replica is read by the others; its data-dir copy is rewritten", async () => {
      const database = dir();
      const key = keyFile();
      const a = await replica(database, key);
      const b = await replica(database, key);
      const next = await a.admin.rotate();
      expect(next).not.toBe(a.admin.token);
      expect(readFileSync(a.admin.file as string, "utf8")).toBe(`${next}\n`);
      expect(await b.currentAdminToken?.()).toBe(next);
      // B restarting with its old copy takes the database's.
      expect((await replica(database, key, join(b.admin.file as string, ".."))).admin.token).toBe(next);
    });

    it("KEELSON_TLS=auto: replicas share the CA, each certificate names its own URL host and the balanced address", async () => {
      const database = dir();
      const key = keyFile();
      await storeOf(database);
      const started = await Promise.all(
        ["cp-1", "cp-2"].map(async (id) => {
          const dataDir = dir();
          const secrets = await replica(database, key, dataDir);
          const settings = defaultServerSettings({
            dataDir,
            tlsMode: "auto",
            host: "10.0.0.1",
            publicUrl: `https://${id}.example.internal:8443`,
            tlsServerNames: "keelson.example.internal",
          });
          return { id, dataDir, tls: await prepareServerTls(settings, secrets) };
        }),
      );
      const [one, two] = started;
      expect(one?.tls?.caCertHash).toBeDefined();
      expect(two?.tls?.caCertHash).toBe(one?.tls?.caCertHash);
      const ca = new X509Certificate(readFileSync(join(one?.dataDir as string, "tls", "ca.crt"), "utf8"));
      for (const r of started) {
        const cert = new X509Certificate(r.tls?.context().cert as string);
        expect(cert.verify(ca.publicKey)).toBe(true);
        expect(cert.checkHost(`${r.id}.example.internal`)).toBe(`${r.id}.example.internal`);
        expect(cert.checkHost("keelson.example.internal")).toBe("keelson.example.internal");
        expect(statSync(join(r.dataDir, "tls", "ca.key")).mode & 0o777).toBe(0o600);
      }
      // A data dir holding another CA is refused rather than serving a second one.
      const stray = dir();
      await prepareServerTls(defaultServerSettings({ dataDir: stray, tlsMode: "auto", host: "10.0.0.1" }));
      const secrets = await replica(database, key, stray);
      const err = await refusal(
        prepareServerTls(defaultServerSettings({ dataDir: stray, tlsMode: "auto", host: "10.0.0.1" }), secrets),
      );
      expect(err.message).toContain(`${join(stray, "tls", "ca.crt")} differs from the tls-ca the replicas share`);

      // The promote step of a rotation: the database's CA moved to previous-ca.crt, a new one in its place.
      const tlsDir = join(one?.dataDir as string, "tls");
      renameSync(join(tlsDir, "ca.crt"), join(tlsDir, "previous-ca.crt"));
      const successor = await newControlPlaneCa();
      caFiles(tlsDir).write(successor);
      expect(await (await replica(database, key, one?.dataDir)).tlsCa?.()).toEqual(successor);
      expect(await (await replica(database, key)).tlsCa?.()).toEqual(successor);
    });

    it("a CA rotation's next CA is the same on every replica, promoted on each to the same CA; the next stage makes a new one", async () => {
      const database = dir();
      const key = keyFile();
      await storeOf(database);
      const staged = (dataDir: string) =>
        defaultServerSettings({ dataDir, tlsMode: "auto", host: "10.0.0.1", tlsNextCa: true });
      const [one, two] = [dir(), dir()];
      const [a, b] = await Promise.all(
        [one, two].map(async (d) => prepareServerTls(staged(d), await replica(database, key, d))),
      );
      // Stage: both serve the current CA and one next CA, and keep it in their data dirs.
      expect(a?.caBundlePem).toBe(b?.caBundlePem);
      expect(splitPemCertificates(a?.caBundlePem as string)).toHaveLength(2);
      const next = caFiles(join(one, "tls", "next")).read();
      expect(next).toBeDefined();
      expect(caFiles(join(two, "tls", "next")).read()).toEqual(next);

      // Promote on each (README "Rotating the CA"), one after the other: both end on that CA.
      for (const d of [one, two]) {
        const tlsDir = join(d, "tls");
        renameSync(join(tlsDir, "ca.crt"), join(tlsDir, "previous-ca.crt"));
        caFiles(tlsDir).write(next as ClusterCa);
        rmSync(join(tlsDir, "next"), { recursive: true });
        const promoted = await prepareServerTls(
          defaultServerSettings({ dataDir: d, tlsMode: "auto", host: "10.0.0.1" }),
          await replica(database, key, d),
        );
        expect(promoted?.caCertHash).toBe(caCertHash((next as ClusterCa).certPem));
      }
      // The next rotation's stage, on both at once: one new next CA, not the promoted one.
      const [c, d] = await Promise.all(
        [one, two].map(async (dd) => prepareServerTls(staged(dd), await replica(database, key, dd))),
      );
      const third = caFiles(join(one, "tls", "next")).read();
      expect(third?.certPem).not.toBe(next?.certPem);
      expect(caFiles(join(two, "tls", "next")).read()).toEqual(third);
      expect(c?.caBundlePem).toBe(d?.caBundlePem);
      expect(c?.caBundlePem).toContain(third?.certPem.trim());
    });

    it("two apps on one database: the admin token of A works on B, a web CLI token minted on A verifies on B, a rotation on A reaches B", async () => {
      const database = dir();
      const key = keyFile();
      const lease = { operationLeaseMs: 3_000, operationLeaseRenewMs: 100, operationLeaseDeadlineMs: 600 };
      const a = await createTestApp({
        dataDir: database,
        secrets: await replica(database, key),
        settings: { ...lease, replicaId: "cp-a" },
      });
      const b = await createTestApp({
        dataDir: database,
        secrets: await replica(database, key),
        settings: { ...lease, replicaId: "cp-b" },
      });
      const closeB = b.close.bind(b);
      b.close = () => closeB(true);
      const adminOfA = a.app.keelson.adminToken.token;
      expect((await b.request({ method: "GET", url: "/v1/projects", token: adminOfA })).statusCode).toBe(200);

      const clusterId = await insertCluster(a.db, a.projectId, "c1");
      const { token } = await issueWebCliSession(a.app.keelson, {
        projectId: a.projectId,
        clusterId,
        identity: { kind: "admin" },
      });
      expect(verifyWebCliToken(b.app.keelson.webcliKey, token)?.clusterId).toBe(clusterId);

      const rotated = await a.request({ method: "POST", url: "/v1/adminToken/rotate", token: adminOfA });
      expect(rotated.statusCode).toBe(201);
      const next = rotated.json().token as string;
      const deadline = Date.now() + 5_000;
      while ((await b.request({ method: "GET", url: "/v1/projects", token: adminOfA })).statusCode !== 403) {
        if (Date.now() > deadline) throw new Error("B still takes the rotated-out admin token");
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await b.request({ method: "GET", url: "/v1/projects", token: next })).statusCode).toBe(200);
      // Before afterEach drops the database they use.
      await b.close();
      await a.close();
    });
  });
}
