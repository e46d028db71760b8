import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { join } from "node:path";
import { readOrCreateSecretFile } from "./secret-file.ts";

/** AES-256-GCM for secrets at rest (cloud credentials, cluster CA keys). Format: v1.iv.tag.data (base64url). */
export class SecretCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error("secret key must be 32 bytes");
  }

  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    const tag = cipher.getAuthTag();
    return ["v1", iv, tag, data].map((p) => (typeof p === "string" ? p : p.toString("base64url"))).join(".");
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, data] = sealed.split(".");
    if (version !== "v1" || !iv || !tag || data === undefined) throw new Error("not a sealed secret");
    const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(data, "base64url")), decipher.final()]).toString("utf8");
  }
}

/** The data dir's file of the sealing key (SQLite; on PostgreSQL a copy of the database's). */
export const SECRET_KEY_FILE = "secret.key";

/** A new 32-byte key as it is kept: base64 text. */
export function newKeyText(): string {
  return randomBytes(32).toString("base64");
}

/** The cipher of a key kept as base64 text. */
export function cipherOfKeyText(text: string): SecretCipher {
  return new SecretCipher(Buffer.from(text.trim(), "base64"));
}

/** Loads the data dir's key, creating it (0600) on first start. */
export function loadSecretCipher(dataDir: string): SecretCipher {
  return cipherOfKeyText(readOrCreateSecretFile(join(dataDir, SECRET_KEY_FILE), newKeyText));
}
