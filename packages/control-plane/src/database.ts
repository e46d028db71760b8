import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseDatabaseUrl, type StoreOptions } from "@keelson/db";
import { SettingsError } from "@keelson/settings";
import type { Logger } from "pino";
import type { ServerSettings } from "./settings.ts";
import { SERVER_VERSION } from "./version.ts";

/** What the log and the start-up summary say the database is: never a password. */
export function databaseLabel(settings: ServerSettings): string {
  return settings.databaseUrl
    ? `postgres ${parseDatabaseUrl(settings.databaseUrl, () => Buffer.alloc(0)).display}`
    : join(settings.dataDir, "keelson.sqlite");
}

/** The password file's first line (a trailing newline is how editors and `echo` leave it). */
export function readPassword(file: string): string {
  return (readFileSync(file, "utf8").split(/\r?\n/, 1)[0] as string).trimEnd();
}

/** A file a setting names but that cannot be read is a bad setting (exit 78), not a crash. */
export function settingFile<T>(name: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new SettingsError(`${name}: ${e.code === "ENOENT" && e.path ? `no file ${e.path}` : e.message}`);
  }
}

/**
 * The store the settings name: PostgreSQL when KEELSON_DATABASE_URL is set, else SQLite in the
 * data dir. Throws SettingsError when a file the URL or the password setting names is unreadable.
 */
export function storeOptions(settings: ServerSettings, logger?: Logger): StoreOptions {
  if (!settings.databaseUrl) {
    return { dialect: "sqlite", file: join(settings.dataDir, "keelson.sqlite"), binaryVersion: SERVER_VERSION };
  }
  return {
    dialect: "postgres",
    binaryVersion: SERVER_VERSION,
    target: settingFile("KEELSON_DATABASE_URL", () => parseDatabaseUrl(settings.databaseUrl as string)),
    ...(settings.databasePasswordFile
      ? {
          password: settingFile("KEELSON_DATABASE_PASSWORD_FILE", () =>
            readPassword(settings.databasePasswordFile as string),
          ),
        }
      : {}),
    poolSize: settings.databasePoolSize,
    statementTimeoutMs: settings.databaseStatementTimeoutMs,
    connectTimeoutMs: settings.databaseConnectTimeoutMs,
    startTimeoutMs: settings.databaseStartTimeoutMs,
    applicationName: `keelson-server ${SERVER_VERSION}`,
    onRetry: (failure, delayMs) =>
      logger?.warn(
        { database: failure.target, answer: failure.answer, code: failure.code, retryInMs: delayMs },
        "database not ready; retrying",
      ),
  };
}
