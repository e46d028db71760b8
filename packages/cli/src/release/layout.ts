import {
  chmodSync,
  existsSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, join, resolve } from "node:path";
import { usageError } from "../errors.ts";

/**
 * Where an installed control plane lives, under a root (`/` on a real host, a temporary
 * directory in tests and wherever systemd does not run):
 *
 *   <root>/opt/keelson/releases/<version>/   unpacked releases (pack-release.ts's layout)
 *   <root>/opt/keelson/current               symlink to the release that runs, switched atomically
 *   <root>/etc/keelson/server.env            keelson-server's settings (systemd EnvironmentFile format)
 *   <root>/etc/keelson/keelson.yaml          the operator tool's own: where releases are downloaded from
 *   <root>/etc/systemd/system/keelson-server.service
 *   <root>/var/lib/keelson/                  the data dir (0700): database, secrets, admin-token, backups/
 *   <root>/var/log/keelson/server.log        the server's output under the process supervisor
 *   <root>/run/keelson/                      the process supervisor's state (supervisor.json)
 */
export interface Layout {
  root: string;
  releases: string;
  current: string;
  etc: string;
  serverEnv: string;
  toolConfig: string;
  unitFile: string;
  dataDir: string;
  backups: string;
  logDir: string;
  runDir: string;
}

export function layoutOf(root: string): Layout {
  const r = resolve(root);
  const at = (...parts: string[]) => join(r, ...parts);
  return {
    root: r,
    releases: at("opt", "keelson", "releases"),
    current: at("opt", "keelson", "current"),
    etc: at("etc", "keelson"),
    serverEnv: at("etc", "keelson", "server.env"),
    toolConfig: at("etc", "keelson", "keelson.yaml"),
    unitFile: at("etc", "systemd", "system", "keelson-server.service"),
    dataDir: at("var", "lib", "keelson"),
    backups: at("var", "lib", "keelson", "backups"),
    logDir: at("var", "log", "keelson"),
    runDir: at("run", "keelson"),
  };
}

export const releaseDir = (layout: Layout, version: string) => join(layout.releases, version);

/** The version `current` points at, or undefined before the first install. */
export function currentVersion(layout: Layout): string | undefined {
  try {
    return basename(readlinkSync(layout.current));
  } catch {
    return undefined;
  }
}

/**
 * Points `current` at a downloaded release: a new link beside it renamed over the old one, so a
 * reader (systemd's ExecStart, the supervisor's next start) sees either release, never neither.
 */
export function switchCurrent(layout: Layout, version: string): void {
  const target = releaseDir(layout, version);
  if (!existsSync(join(target, "manifest.json")))
    throw usageError(`release ${version} is not in ${layout.releases}: run keelson download first`);
  const next = `${layout.current}.next`;
  rmSync(next, { force: true });
  symlinkSync(join("releases", version), next);
  renameSync(next, layout.current);
}

/** KEY=VALUE lines (systemd's EnvironmentFile subset: no quotes needed, `#` comments). */
export function readEnvFile(file: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    env[line.slice(0, eq).trim()] = line
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, "$1");
  }
  return env;
}

/**
 * Sets `changes` in an env file: a key's line replaced where it is (comments and other lines
 * kept), a new key appended; written beside it (0600) and renamed over it.
 */
export function updateEnvFile(file: string, changes: Record<string, string>): void {
  const left = new Map(Object.entries(changes));
  const lines = readFileSync(file, "utf8")
    .replace(/\n$/, "")
    .split("\n")
    .map((raw) => {
      const key = raw.trim().startsWith("#") ? undefined : raw.slice(0, raw.indexOf("=")).trim();
      const value = key ? left.get(key) : undefined;
      if (key === undefined || value === undefined) return raw;
      left.delete(key);
      return `${key}=${value}`;
    });
  for (const [key, value] of left) lines.push(`${key}=${value}`);
  writeFileSync(`${file}.tmp`, `${lines.join("\n")}\n`, { mode: 0o600 });
  chmodSync(`${file}.tmp`, 0o600);
  renameSync(`${file}.tmp`, file);
}
