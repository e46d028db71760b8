import { SETTINGS_EXIT_CODE, SettingsError } from "@keelson/settings";
import { readServerSettings, type ServerSettings } from "../settings.ts";
import { backupControlPlane, defaultBackupDir } from "./backup.ts";
import { migrateToPostgres, terminalOutput } from "./migrate-to-postgres.ts";
import { restoreControlPlane } from "./restore.ts";

/**
 * The operator's commands of keelson-server, each with the server's own settings (one schema,
 * the same variables and flags):
 *   keelson-server migrate-to-postgres [flags]
 *   keelson-server backup [DIR] [flags]     (DIR: default <data dir>/backups/keelson-<time>-<version>)
 *   keelson-server restore DIR [flags]
 * A backup or restore directory is the word right after the command, so it cannot be mistaken
 * for a flag's value. Exit 0 when done, 1 when refused or failed (the message says why), 78 for
 * a bad setting.
 */
const [command = "", ...rest] = process.argv.slice(2);
const out = terminalOutput(process.stderr);
const positional = rest[0] !== undefined && !rest[0].startsWith("--") ? rest[0] : undefined;
const flags = positional === undefined ? rest : rest.slice(1);

async function run(settings: ServerSettings): Promise<number> {
  if (command === "migrate-to-postgres") {
    if (positional !== undefined)
      throw new SettingsError(`unexpected argument "${positional}" (settings are --name value)`);
    return migrateToPostgres(settings, out);
  }
  if (command === "backup") {
    const dir = positional ?? defaultBackupDir(settings);
    const manifest = await backupControlPlane(settings, dir);
    out.line(`backup of keelson-server ${manifest.serverVersion} (${manifest.dialect}) written to ${dir}:`);
    for (const f of manifest.files)
      out.line(`  ${f.name.padEnd(16)} ${String(f.bytes).padStart(12)} bytes  sha256 ${f.sha256.slice(0, 16)}`);
    // The path alone on stdout, for scripts: `dir=$(keelson-server backup)`.
    process.stdout.write(`${dir}\n`);
    return 0;
  }
  if (positional === undefined)
    throw new SettingsError("restore needs the backup's directory: keelson-server restore DIR");
  const manifest = await restoreControlPlane(settings, positional);
  out.line(
    `restored the backup keelson-server ${manifest.serverVersion} took at ${manifest.createdAt} (${manifest.dialect}); ` +
      "what it replaced is kept beside it as *.replaced-<time>. Start keelson-server.",
  );
  return 0;
}

try {
  process.exitCode = await run(readServerSettings(process.env, flags));
} catch (err) {
  out.line(`keelson-server ${command}: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = err instanceof SettingsError ? SETTINGS_EXIT_CODE : 1;
}
