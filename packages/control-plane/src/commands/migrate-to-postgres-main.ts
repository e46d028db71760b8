import { SETTINGS_EXIT_CODE, SettingsError } from "@keelson/settings";
import { readServerSettings } from "../settings.ts";
import { MigrateRefused, migrateToPostgres, terminalOutput } from "./migrate-to-postgres.ts";

/**
 * `keelson-server migrate-to-postgres [flags]`: the server's own settings (one schema, the
 * same variables and flags), then the move. Exit 0 when every table matched, 1 when the copy
 * was refused or differs, 78 for a bad setting.
 */
const out = terminalOutput(process.stderr);
try {
  const settings = readServerSettings(process.env, process.argv.slice(3));
  process.exitCode = await migrateToPostgres(settings, out);
} catch (err) {
  if (err instanceof SettingsError) {
    out.line(`keelson-server migrate-to-postgres: ${err.message}`);
    process.exitCode = SETTINGS_EXIT_CODE;
  } else {
    out.line(
      `keelson-server migrate-to-postgres: ${err instanceof MigrateRefused || err instanceof Error ? err.message : String(err)}`,
    );
    process.exitCode = 1;
  }
}
