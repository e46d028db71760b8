import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { CliError, usageError } from "../errors.ts";
import { fetchReleaseFiles } from "./fetch-release.ts";
import { currentVersion, type Layout, releaseDir, switchCurrent } from "./layout.ts";
import { readReleaseManifest, verifyRelease } from "./manifest.ts";
import { type Readiness, readiness, serverApi } from "./server.ts";
import { failureOf, type ServiceManager } from "./service.ts";
import { ensureServiceUser, giveDataDir, SERVICE_USER } from "./service-user.ts";
import { serverUnit } from "./unit.ts";

/**
 * `keelson install control-plane`, `keelson download` and `keelson install <version>`: putting
 * releases in place and the service around them. Each step says what it will do, skips what is
 * already so, and says what it did.
 */

export interface Say {
  /** Progress and what will happen (stderr). */
  note(text: string): void;
  /** Results a script reads (stdout). */
  print(text: string): void;
}

export interface ToolConfig {
  /** Where `keelson download` fetches releases: a directory or an http(s) URL. */
  releaseLocation?: string;
}

export function readToolConfig(layout: Layout): ToolConfig {
  return existsSync(layout.toolConfig) ? ((parse(readFileSync(layout.toolConfig, "utf8")) ?? {}) as ToolConfig) : {};
}

/**
 * Copies a release directory into releases/<version>: a copy beside the final name, checked
 * against its SHA256SUMS (which covers a damaged source and a damaged copy alike) and renamed
 * when whole. Idempotent: a release already in place and
 * intact is left as it is.
 */
export function placeRelease(layout: Layout, from: string, say: Say): string {
  const manifest = readReleaseManifest(from);
  const to = releaseDir(layout, manifest.version);
  if (existsSync(to)) {
    verifyRelease(to);
    say.note(`release ${manifest.version} is already in ${to} (checksums match)`);
    return manifest.version;
  }
  say.note(`copying ${from} to ${to} and checking the copy against its SHA256SUMS`);
  mkdirSync(layout.releases, { recursive: true });
  const partial = `${to}.partial`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(from, partial, { recursive: true, verbatimSymlinks: true });
  try {
    verifyRelease(partial);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  renameSync(partial, to);
  say.note(`release ${manifest.version} placed in ${to}`);
  return manifest.version;
}

/**
 * `keelson download <secret> <version>`: `keelson-<version>.tar.gz` and its `.sha256` from the
 * release location (a directory, or a URL the secret is sent to as a bearer token), the tarball
 * checked against the .sha256, unpacked beside the releases and checked against its SHA256SUMS.
 * A location that holds the unpacked `keelson-<version>/` directory is copied instead.
 */
export async function downloadRelease(
  layout: Layout,
  location: string,
  secret: string,
  version: string,
  say: Say,
  caFile?: string,
): Promise<string> {
  if (!/^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/.test(version)) throw usageError(`version: "${version}" is not a version`);
  const to = releaseDir(layout, version);
  if (existsSync(to)) return placeRelease(layout, to, say);
  const name = `keelson-${version}`;
  mkdirSync(layout.releases, { recursive: true });
  const work = join(layout.releases, `.download-${version}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work);
  try {
    const tarball = join(work, `${name}.tar.gz`);
    if (/^https?:\/\//.test(location)) {
      say.note(`downloading ${name}.tar.gz from ${location}`);
      await fetchReleaseFiles(
        location.replace(/\/+$/, ""),
        [
          { name: `${name}.tar.gz.sha256`, dest: `${tarball}.sha256` },
          { name: `${name}.tar.gz`, dest: tarball },
        ],
        { secret, ...(caFile ? { caFile } : {}) },
      );
    } else {
      const dir = resolve(location);
      if (!existsSync(join(dir, `${name}.tar.gz`)) && existsSync(join(dir, name, "manifest.json"))) {
        return placeRelease(layout, join(dir, name), say);
      }
      if (!existsSync(join(dir, `${name}.tar.gz`))) throw new CliError(`${dir} has no ${name}.tar.gz`);
      say.note(`copying ${name}.tar.gz from ${dir}`);
      cpSync(join(dir, `${name}.tar.gz`), tarball);
      cpSync(join(dir, `${name}.tar.gz.sha256`), `${tarball}.sha256`);
    }
    try {
      execFileSync("sha256sum", ["--check", "--quiet", "--strict", `${name}.tar.gz.sha256`], {
        cwd: work,
        stdio: "pipe",
      });
    } catch {
      throw new CliError(`${name}.tar.gz does not match its .sha256: refused (nothing was unpacked)`);
    }
    execFileSync("tar", ["-xzf", tarball, "-C", work, "--no-same-owner"]);
    return placeRelease(layout, join(work, name), say);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function writeIfMissing(file: string, text: string, mode: number, say: Say, what: string): void {
  if (existsSync(file)) {
    say.note(`${what}: ${file} kept as it is`);
    return;
  }
  writeFileSync(`${file}.tmp`, text, { mode });
  chmodSync(`${file}.tmp`, mode);
  renameSync(`${file}.tmp`, file);
  say.note(`${what}: wrote ${file} (mode ${mode.toString(8)})`);
}

export interface InstallOptions {
  release: string;
  listen: string;
  releaseLocation?: string | undefined;
  /** KEELSON_DATABASE_URL for a new server.env: PostgreSQL instead of SQLite in the data dir. */
  databaseUrl?: string | undefined;
  /** KEELSON_DATABASE_PASSWORD_FILE for a new server.env. */
  databasePasswordFile?: string | undefined;
  /**
   * KEELSON_SECRETS_KEY_FILE for a new server.env on PostgreSQL (the key sealing the secrets the
   * replicas share); by default `<etc>/secrets.key`, made here if missing.
   */
  secretsKeyFile?: string | undefined;
  /** KEELSON_REPLICA_ID for a new server.env: each replica on one database needs its own. */
  replicaId?: string | undefined;
}

/** The key file a PostgreSQL install's server.env names. */
function secretsKeyFileOf(layout: Layout, options: InstallOptions): string {
  return options.secretsKeyFile ?? join(layout.etc, "secrets.key");
}

/** A new server.env: the listen address, the data dir and, when given, the PostgreSQL database. */
function serverEnvText(layout: Layout, options: InstallOptions): string {
  const lines = [
    `# keelson-server's settings (README "Settings"); read at every start.`,
    `KEELSON_LISTEN=${options.listen}`,
    `KEELSON_DATA_DIR=${layout.dataDir}`,
    ...(options.databaseUrl ? [`KEELSON_DATABASE_URL=${options.databaseUrl}`] : []),
    ...(options.databasePasswordFile ? [`KEELSON_DATABASE_PASSWORD_FILE=${options.databasePasswordFile}`] : []),
    ...(options.databaseUrl ? [`KEELSON_SECRETS_KEY_FILE=${secretsKeyFileOf(layout, options)}`] : []),
    ...(options.replicaId ? [`KEELSON_REPLICA_ID=${options.replicaId}`] : []),
    "NODE_ENV=production",
  ];
  return `${lines.join("\n")}\n`;
}

/** `keelson install control-plane`: the release, the settings, the data dir, the admin token, the unit, started. */
export async function installControlPlane(
  layout: Layout,
  service: ServiceManager,
  options: InstallOptions,
  say: Say,
): Promise<void> {
  const manifest = readReleaseManifest(options.release);
  const installed = currentVersion(layout);
  say.note(
    `will install keelson ${manifest.version} under ${layout.root} as keelson-server.service (${service.kind}):\n` +
      `  release   ${releaseDir(layout, manifest.version)}\n  settings  ${layout.serverEnv}\n` +
      `  data dir  ${layout.dataDir} (0700), admin token ${join(layout.dataDir, "admin-token")} (0600)\n` +
      `  database  ${options.databaseUrl ? "PostgreSQL (KEELSON_DATABASE_URL)" : "SQLite in the data dir"}\n` +
      `  user      ${SERVICE_USER} (a system user; the unit's User=)\n` +
      `  unit      ${layout.unitFile}`,
  );
  if (installed && installed !== manifest.version)
    throw new CliError(
      `keelson ${installed} is installed here: use \`keelson upgrade --config FILE\` (it backs up first and rolls back on failure)`,
    );
  const version = placeRelease(layout, options.release, say);
  for (const dir of [layout.etc, layout.logDir, layout.runDir, join(layout.unitFile, "..")])
    mkdirSync(dir, { recursive: true });
  mkdirSync(layout.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(layout.dataDir, 0o700);
  writeIfMissing(layout.serverEnv, serverEnvText(layout, options), 0o600, say, "settings");
  if (options.databaseUrl && !options.secretsKeyFile) {
    // The first replica's key; every other replica is installed with --secrets-key-file and a copy of it.
    writeIfMissing(
      secretsKeyFileOf(layout, options),
      `${randomBytes(32).toString("base64")}\n`,
      0o600,
      say,
      "secrets key (copy it to every replica: --secrets-key-file)",
    );
  }
  writeIfMissing(
    join(layout.dataDir, "admin-token"),
    `kadm_${randomBytes(32).toString("base64url")}\n`,
    0o600,
    say,
    "admin token",
  );
  if (options.releaseLocation) {
    writeFileSync(
      layout.toolConfig,
      stringify({ ...readToolConfig(layout), releaseLocation: options.releaseLocation }),
    );
    say.note(`release location ${options.releaseLocation} kept in ${layout.toolConfig}`);
  }
  const user = ensureServiceUser(layout);
  say.note(
    `service user: ${user.name} (uid ${user.uid}) ${user.created ? "created" : "exists"} in ${join(layout.root, "etc", "passwd")}`,
  );
  if (service.kind === "systemd") giveDataDir(layout, user);
  else say.note(`no systemd here: the supervisor runs keelson-server as this user, not ${user.name}`);
  writeFileSync(layout.unitFile, serverUnit(layout, manifest.entries.server));
  say.note(`unit: wrote ${layout.unitFile}`);
  if (currentVersion(layout) !== version) switchCurrent(layout, version);
  say.note(`current -> releases/${version}`);
  const ready = await startAndWait(layout, service, 60_000);
  if (!ready.ready)
    throw new CliError(`keelson-server did not become ready: ${failureOf(service.logTail(200))} (${ready.status})`);
  const api = serverApi(layout);
  await api.close();
  say.note(`keelson-server ${version} runs and is ready at ${api.url}.`);
  say.print(
    `Log in as the admin:\n  KEELSON_TOKEN=$(cat ${join(layout.dataDir, "admin-token")}) keelson --url ${api.url} config set-context admin --use\n  keelson clusters list`,
  );
}

/** Starts the service and waits for it (waitReady). */
export async function startAndWait(layout: Layout, service: ServiceManager, timeoutMs: number): Promise<Readiness> {
  await service.start();
  const api = serverApi(layout);
  try {
    return await waitReady(api, service, timeoutMs);
  } finally {
    await api.close();
  }
}

/**
 * Waits for /readyz while the service runs; gives up early when the service gave up or has
 * been started again (a crash loop), so a failing release is named in seconds, not at the timeout.
 */
export async function waitReady(
  api: ReturnType<typeof serverApi>,
  service: ServiceManager,
  timeoutMs: number,
): Promise<Readiness> {
  const first = service.health().starts;
  const until = Date.now() + timeoutMs;
  let last: Readiness = { ready: false, status: "not asked yet", agentLinks: 0 };
  while (Date.now() < until) {
    last = await readiness(api);
    if (last.ready) return last;
    const h = service.health();
    if (h.gaveUp) return { ...last, status: `the service gave up: ${h.gaveUp}` };
    if (h.starts > first)
      return { ...last, status: `keelson-server exited (${h.lastExit}) and was started again: it fails at start` };
    if (!h.running) return { ...last, status: `keelson-server is not running (last exit ${h.lastExit})` };
    await new Promise((r) => setTimeout(r, 250));
  }
  return { ...last, status: `not ready within ${timeoutMs / 1000} s: ${last.status}` };
}
