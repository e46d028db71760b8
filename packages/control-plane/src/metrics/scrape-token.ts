import { SettingsError } from "@keelson/settings";
import { readPassword, settingFile } from "../database.ts";
import type { ServerSettings } from "../settings.ts";

/** The scrape token of /metrics, read once at start from KEELSON_METRICS_TOKEN_FILE; throws SettingsError. */
export function readScrapeToken(settings: Pick<ServerSettings, "metricsTokenFile">): string | undefined {
  const file = settings.metricsTokenFile;
  if (file === undefined) return undefined;
  const token = settingFile("KEELSON_METRICS_TOKEN_FILE", () => readPassword(file));
  // A short token would be guessable, and an empty one would let an empty header through.
  if (token.length < 16)
    throw new SettingsError(`KEELSON_METRICS_TOKEN_FILE: ${file} must hold a token of 16 characters or more`);
  return token;
}
