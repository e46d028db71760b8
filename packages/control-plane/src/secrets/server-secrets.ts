import { join } from "node:path";
import type { Db, Store } from "@keelson/db";
import { SettingsError } from "@keelson/settings";
import { readPassword, settingFile } from "../database.ts";
import {
  ADMIN_TOKEN_FILE,
  type AdminTokenSource,
  configuredAdminToken,
  ensureAdminToken,
  newAdminToken,
} from "../domain/identity/admin-token.ts";
import { loadWebCliKey, parseWebCliKey, WEBCLI_KEY_FILE } from "../domain/webcli/key.ts";
import type { ClusterCa } from "../pki/cluster-ca.ts";
import type { ServerSettings } from "../settings.ts";
import { readIfExists } from "../storage/data-dir-files.ts";
import { type CaSource, caFiles, NEXT_CA_DIR, newControlPlaneCa, PREVIOUS_CA_FILE, TLS_DIR } from "../tls/ca-files.ts";
import { cipherOfKeyText, loadSecretCipher, newKeyText, SECRET_KEY_FILE, type SecretCipher } from "./cipher.ts";
import {
  fileCopy,
  type LocalCopy,
  readSharedSecret,
  renewSharedSecret,
  replaceSharedSecret,
  SECRETS_KEY_SETTING,
  sharedSecret,
} from "./shared-secrets.ts";

/** The secrets a server starts with (README "Shared secrets"). */
export interface ServerSecrets {
  /** Seals cloud credentials and cluster CA keys at rest. */
  cipher: SecretCipher;
  admin: AdminTokenSource;
  /** The HMAC key of web CLI tokens. */
  webcliKey: Buffer;
  /**
   * The admin token the replicas share now (PostgreSQL, after a rotation on another replica);
   * undefined on SQLite and with KEELSON_ADMIN_TOKEN, where no other server changes it.
   */
  currentAdminToken?: () => Promise<string | undefined>;
  /**
   * The CA of KEELSON_TLS=auto the replicas share (PostgreSQL); undefined on SQLite, where it is
   * the data dir's `tls/` files.
   */
  tlsCa?: CaSource;
  /** A CA rotation's next CA (KEELSON_TLS_NEXT_CA), the same on every replica (PostgreSQL). */
  tlsNextCa?: CaSource;
}

const SHARED = {
  secretKey: "secret-key",
  adminToken: "admin-token",
  webcliKey: "webcli-key",
  tlsCa: "tls-ca",
  tlsNextCa: "tls-next-ca",
} as const;

/**
 * SQLite (one server): files in the data dir, created on first start. PostgreSQL (replicas):
 * rows of `shared_secrets` sealed by KEELSON_SECRETS_KEY_FILE's key, created by the first
 * replica (adopting the data dir's files of an install from before), read by the others; a
 * replica without the key refuses to start (SettingsError, exit 78) rather than make its own.
 */
export async function loadServerSecrets(
  store: Store,
  settings: Pick<ServerSettings, "dataDir" | "adminToken" | "secretsKeyFile">,
): Promise<ServerSecrets> {
  const { dataDir } = settings;
  if (store.dialect === "sqlite") {
    return {
      cipher: loadSecretCipher(dataDir),
      admin: ensureAdminToken(dataDir, settings.adminToken),
      webcliKey: loadWebCliKey(dataDir),
    };
  }
  const sealing = readSecretsKey(settings.secretsKeyFile);
  const db = store.db;
  const cipher = cipherOfKeyText(
    await sharedSecret(db, sealing, {
      name: SHARED.secretKey,
      local: fileCopy(join(dataDir, SECRET_KEY_FILE)),
      generate: newKeyText,
    }),
  );
  const webcliFile = join(dataDir, WEBCLI_KEY_FILE);
  const webcliKey = parseWebCliKey(
    `the database's ${SHARED.webcliKey}`,
    await sharedSecret(db, sealing, { name: SHARED.webcliKey, local: fileCopy(webcliFile), generate: newKeyText }),
  );
  // Made only when KEELSON_TLS=auto asks for it: a replica behind a TLS proxy needs none.
  const tlsCa: CaSource = async () => {
    const pair = await sharedSecret(db, sealing, {
      name: SHARED.tlsCa,
      local: caCopy(join(dataDir, TLS_DIR)),
      generate: newCaText,
      // The promote step of a CA rotation: the data dir's previous CA is the one the database holds.
      succeeds: (_local, shared) =>
        readIfExists(join(dataDir, TLS_DIR, PREVIOUS_CA_FILE)) === (JSON.parse(shared) as ClusterCa).certPem,
    });
    return JSON.parse(pair);
  };
  // A rotation's next CA: one for every replica, so each serves the same one in its bundle and
  // the promote step on each makes the same CA current. A data dir's own (staged before it was
  // shared) gives way to the database's. Once promoted (it is the current CA), the next
  // rotation's stage makes a new one.
  const tlsNextCa: CaSource = async () => {
    const spec = { name: SHARED.tlsNextCa, local: caCopy(join(dataDir, TLS_DIR, NEXT_CA_DIR)), changes: true };
    const current = await tlsCa();
    const next = await sharedSecret(db, sealing, { ...spec, generate: newCaText });
    if ((JSON.parse(next) as ClusterCa).certPem !== current.certPem) return JSON.parse(next);
    return JSON.parse(await renewSharedSecret(db, sealing, spec, next, await newCaText()));
  };
  const tls = { tlsCa, tlsNextCa };
  if (settings.adminToken) return { cipher, webcliKey, ...tls, admin: configuredAdminToken(settings.adminToken) };
  return { cipher, webcliKey, ...tls, ...(await sharedAdminToken(db, sealing, join(dataDir, ADMIN_TOKEN_FILE))) };
}

async function sharedAdminToken(
  db: Db,
  sealing: SecretCipher,
  file: string,
): Promise<Pick<ServerSecrets, "admin" | "currentAdminToken">> {
  const spec = { name: SHARED.adminToken, local: fileCopy(file), generate: newAdminToken, changes: true };
  return {
    admin: {
      token: await sharedSecret(db, sealing, spec),
      file,
      rotate: async () => {
        const next = newAdminToken();
        await replaceSharedSecret(db, sealing, spec, next);
        return next;
      },
    },
    currentAdminToken: () => readSharedSecret(db, sealing, SHARED.adminToken),
  };
}

const newCaText = async () => JSON.stringify(await newControlPlaneCa());

/** A CA's files in `dir` as one secret's copy: its certificate and key, as JSON. */
function caCopy(dir: string): LocalCopy {
  const files = caFiles(dir);
  return {
    where: files.where,
    read: () => {
      const ca = files.read();
      return ca && JSON.stringify(ca);
    },
    write: (value) => files.write(JSON.parse(value)),
  };
}

/** The operator's key: required on PostgreSQL, the first line of the file, 32 bytes in base64. */
function readSecretsKey(file: string | undefined): SecretCipher {
  if (!file) {
    throw new SettingsError(
      `${SECRETS_KEY_SETTING} is required on PostgreSQL: the replicas share their secrets (the sealing key, admin ` +
        "token, web CLI key, TLS CA) in the database, sealed by this key, and a replica never makes its own. " +
        "Create it once (`openssl rand -base64 32 > /etc/keelson/secrets.key; chmod 600 /etc/keelson/secrets.key`) " +
        "and give every replica the same file",
    );
  }
  const text = settingFile(SECRETS_KEY_SETTING, () => readPassword(file));
  const key = Buffer.from(text, "base64");
  if (key.length !== 32) {
    throw new SettingsError(
      `${SECRETS_KEY_SETTING}: ${file} must hold 32 bytes in base64 on its first line (\`openssl rand -base64 32\`), got ${key.length} bytes`,
    );
  }
  return cipherOfKeyText(text);
}
