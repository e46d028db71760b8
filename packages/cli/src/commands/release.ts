import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { REPLICA_ID, REPLICA_ID_RULE } from "@keelson/protocol";
import { Command } from "commander";
import { CliError, EXIT, usageError } from "../errors.ts";
import { parseCommandLine, type Terminal } from "../program.ts";
import { downloadRelease, installControlPlane, readToolConfig, type Say, startAndWait } from "../release/install.ts";
import { currentVersion, type Layout, layoutOf, readEnvFile, switchCurrent, updateEnvFile } from "../release/layout.ts";
import { type LocalhostOptions, localhostSettings } from "../release/localhost.ts";
import { readReleaseManifest, verifyRelease } from "../release/manifest.ts";
import { serverApiUrl } from "../release/server.ts";
import { failureOf, type ServiceManager, serviceManager } from "../release/service.ts";
import { serverUnit } from "../release/unit.ts";
import { planUpgrade, rollbackControlPlane, sayPlan, upgradeControlPlane } from "../release/upgrade.ts";
import { readUpgradeConfig } from "../release/upgrade-config.ts";
import { examples } from "./common.ts";

/**
 * The operator's commands on the control plane's own host (spec §4.9): install, download,
 * install <version>, configure-localhost, upgrade --config, stop, rollback --dir, advanced-ddu
 * scale-du up, upgrade-du.
 * They act on the local installation (README "Installing the control plane"), not through the
 * API's settings, so they are a program of their own: `--config` here is the upgrade's config
 * file, not the CLI's contexts file. program.ts hands a command line over when `isLocalCommand`.
 */

const LOCAL = new Set(["install", "download", "configure-localhost", "stop", "rollback", "advanced-ddu", "upgrade-du"]);

/**
 * Whether argv is one of these commands; `upgrade` is the control plane's unless it names a
 * cluster (`--type`), and `advanced-ddu upgrade-mgmt` acts on the management cluster through
 * the API (commands/upgrade-mgmt.ts).
 */
export function isLocalCommand(argv: readonly string[]): boolean {
  const [first, second] = argv;
  if (first === undefined) return false;
  if (first === "upgrade") return !argv.includes("--type") && !argv.some((a) => a.startsWith("--type="));
  if (first === "advanced-ddu" && second === "upgrade-mgmt") return false;
  return LOCAL.has(first);
}

/** The release this CLI runs from, when it runs from one (packages/cli/src/commands → the release root). */
const OWN_RELEASE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

interface Env {
  path: string;
  say: Say;
}

function context(root: string | undefined, env: Env): { layout: Layout; service: ServiceManager } {
  const layout = layoutOf(root ?? "/");
  return { layout, service: serviceManager(layout, env.path) };
}

const rootOption = (c: Command) =>
  c.option(
    "--root <dir>",
    "where the control plane is installed (default /; a temporary root runs it under a process supervisor)",
  );

/** Wraps an action: the runner turns its errors into exit codes (program.ts). */
export type LocalRun = (fn: (...args: unknown[]) => Promise<void>) => (...args: unknown[]) => Promise<void>;

export function localProgram(env: Env, run: LocalRun): Command {
  const { say } = env;
  const program = new Command("keelson").description(
    "Install, upgrade and roll back the Keelson control plane on this host (spec §4.9).",
  );
  examples(
    rootOption(
      program
        .command("install")
        .argument("<what>", "`control-plane`, or a downloaded release's version to switch to")
        .description("Install the control plane as keelson-server.service, or switch to a downloaded release")
        .option("--release <dir>", "an unpacked release (default: the release this keelson runs from)")
        .option("--version <version>", "a release already downloaded with keelson download")
        .option("--listen <addr>", "keelson-server's KEELSON_LISTEN for a new install", "127.0.0.1:8080")
        .option("--release-location <dir-or-url>", "where keelson download fetches releases from")
        .option(
          "--database-url <url>",
          "keelson-server's KEELSON_DATABASE_URL for a new install: PostgreSQL (default: SQLite in the data dir)",
        )
        .option("--database-password-file <file>", "keelson-server's KEELSON_DATABASE_PASSWORD_FILE for a new install")
        .option(
          "--secrets-key-file <file>",
          "keelson-server's KEELSON_SECRETS_KEY_FILE for a new install on PostgreSQL: the first replica's key, for every other replica (default: <root>/etc/keelson/secrets.key, made if missing)",
        )
        .option(
          "--replica-id <id>",
          "keelson-server's KEELSON_REPLICA_ID for a new install: each replica on one database needs its own (default: the host name's first label)",
        ),
    ),
    "keelson install control-plane --release ./keelson-0.3.0",
    "keelson install control-plane --root /tmp/kroot --release ./keelson-0.3.0 --listen 127.0.0.1:18080",
    "keelson install control-plane --database-url postgres://keelson@db.internal/keelson --database-password-file /etc/keelson/db-password",
    "keelson install 0.3.1",
  ).action(
    run(async (what, options) => {
      const o = options as {
        root?: string;
        release?: string;
        version?: string;
        listen: string;
        releaseLocation?: string;
        databaseUrl?: string;
        databasePasswordFile?: string;
        secretsKeyFile?: string;
        replicaId?: string;
      };
      const { layout, service } = context(o.root, env);
      if (what === "control-plane") {
        if (o.replicaId !== undefined && !REPLICA_ID.test(o.replicaId))
          throw usageError(`--replica-id: ${REPLICA_ID_RULE}`);
        const release = o.release
          ? resolve(o.release)
          : o.version
            ? join(layout.releases, o.version)
            : existsSync(join(OWN_RELEASE, "manifest.json"))
              ? OWN_RELEASE
              : undefined;
        if (!release) throw usageError("--release DIR or --version V: which release to install");
        if (o.databaseUrl !== undefined && !/^postgres(ql)?:\/\/[^/]/.test(o.databaseUrl))
          throw usageError("--database-url: must be a postgres:// or postgresql:// URL with a host");
        await installControlPlane(
          layout,
          service,
          {
            release,
            listen: o.listen,
            releaseLocation: o.releaseLocation,
            databaseUrl: o.databaseUrl,
            databasePasswordFile: o.databasePasswordFile && resolve(o.databasePasswordFile),
            secretsKeyFile: o.secretsKeyFile && resolve(o.secretsKeyFile),
            replicaId: o.replicaId,
          },
          say,
        );
        return;
      }
      const version = what as string;
      const installed = currentVersion(layout);
      say.note(`will switch ${layout.current} from ${installed ?? "(nothing)"} to releases/${version}`);
      if (installed === version) {
        say.note(`keelson ${version} is already current: nothing to do`);
        return;
      }
      verifyRelease(join(layout.releases, version));
      if (service.health().running)
        throw new CliError(
          `keelson-server ${installed} is running: a switch under it would migrate without a backup; use keelson upgrade --config FILE, or keelson stop first`,
        );
      switchCurrent(layout, version);
      say.note(`switched: current -> releases/${version}; keelson advanced-ddu scale-du up starts it`);
    }),
  );

  examples(
    rootOption(
      program
        .command("download")
        .argument(
          "<secret>",
          "the credential the release location asks for (sent to a URL as a bearer token; `-` for a directory)",
        )
        .argument("<version>", "the release, e.g. 0.3.0")
        .description(
          "Fetch a release from the release location, verify its checksums and unpack it beside the current one",
        )
        .option("--location <dir-or-url>", "release location (default: the one keelson install kept)")
        .option(
          "--ca-file <pem>",
          "for an https:// location: trust only these CA certificates (a private release server)",
        ),
    ),
    "keelson download - 0.3.0 --location /srv/keelson-releases",
    'keelson download "$RELEASE_SECRET" 0.3.0 --location https://releases.example.com/keelson --ca-file ca.pem',
  ).action(
    run(async (secretArg, versionArg, options) => {
      const [secret, version] = [secretArg as string, versionArg as string];
      const o = options as { root?: string; location?: string; caFile?: string };
      const { layout } = context(o.root, env);
      const location = o.location ?? readToolConfig(layout).releaseLocation;
      if (!location) throw usageError("--location: no release location given and none kept by keelson install");
      say.note(`will download keelson ${version} from ${location} into ${layout.releases}`);
      const placed = await downloadRelease(layout, location, secret, version, say, o.caFile);
      say.note(`downloaded and verified keelson ${placed}; keelson upgrade --config FILE switches to it`);
    }),
  );

  examples(
    rootOption(
      program
        .command("upgrade")
        .description("Upgrade the control plane to a downloaded release; rolls back by itself on failure")
        .requiredOption("--config <file>", "the upgrade's config file (README: Upgrading the control plane)")
        .option("--plan", "print what it would do and whether it may, change nothing"),
    ),
    "keelson upgrade --config upgrade.yaml --plan",
    "keelson upgrade --config upgrade.yaml",
  ).action(
    run(async (options) => {
      const o = options as { root?: string; config: string; plan?: boolean };
      const config = readUpgradeConfig(o.config);
      const { layout, service } = context(o.root ?? config.root, env);
      if (o.plan) {
        const plan = await planUpgrade(layout, config, service);
        sayPlan(plan, say);
        if (plan.problems.length > 0) throw new CliError(`the upgrade would be refused: ${plan.problems.join("; ")}`);
        say.note("nothing was changed (--plan)");
        return;
      }
      await upgradeControlPlane(layout, config, service, env.path, say);
    }),
  );

  examples(
    rootOption(
      program
        .command("configure-localhost")
        .description(
          "Set the control plane's listen addresses (IPv4/IPv6) and its load balancer settings in server.env; restarts a running keelson-server",
        )
        .option("--ipv4 <addr>", "listen on this IPv4 address (0.0.0.0: all)")
        .option("--ipv6 <addr>", "listen on this IPv6 address (:: with --ipv4 0.0.0.0: one dual-stack listener)")
        .option("--port <n>", "listen on this port (default: the current one)")
        .option("--lb-url <url>", "the load balancer's URL, as hosts reach the control plane (KEELSON_PUBLIC_URL)")
        .option(
          "--lb-addresses <list>",
          "the load balancer's addresses or CIDRs, comma-separated (KEELSON_TRUST_PROXY)",
        ),
    ),
    "keelson configure-localhost --ipv4 0.0.0.0 --ipv6 :: --port 8443",
    "keelson configure-localhost --lb-url https://keelson.example.com --lb-addresses 10.0.0.5,10.0.0.6",
  ).action(
    run(async (options) => {
      const o = options as LocalhostOptions & { root?: string };
      const { layout, service } = context(o.root, env);
      await configureLocalhost(layout, service, o, say);
    }),
  );

  examples(
    rootOption(program.command("stop").description("Stop keelson-server (also a half-failed upgrade's)")),
    "keelson stop",
  ).action(
    run(async (options) => {
      const o = options as { root?: string };
      const { layout, service } = context(o.root, env);
      const h = service.health();
      say.note(`will stop keelson-server ${currentVersion(layout) ?? ""} (${service.kind})`);
      await service.stop();
      say.note(h.running ? "stopped" : "it was not running: nothing to stop");
    }),
  );

  examples(
    rootOption(
      program
        .command("rollback")
        .description("Put back the release and database of an upgrade's backup; lists what was made since")
        .requiredOption("--dir <backup_dir>", "the backup the upgrade printed")
        .option("--agents-timeout-seconds <n>", "how long to wait for the agents", "120"),
    ),
    "keelson rollback --dir /var/lib/keelson/backups/upgrade-0.2.0-to-0.3.0-20261126T011500Z",
  ).action(
    run(async (options) => {
      const o = options as {
        root?: string;
        dir: string;
        agentsTimeoutSeconds: string;
      };
      const seconds = Number(o.agentsTimeoutSeconds);
      if (!Number.isInteger(seconds) || seconds < 0) throw usageError("--agents-timeout-seconds: a whole number");
      const { layout, service } = context(o.root, env);
      await rollbackControlPlane(layout, resolve(o.dir), service, env.path, seconds, say);
    }),
  );

  const ddu = program
    .command("advanced-ddu")
    .description(
      "The deployment unit (the control plane's service); `advanced-ddu upgrade-mgmt --config SPEC` " +
        "upgrades the management cluster through the API (its own --help)",
    );
  const scale = ddu.command("scale-du").description("Start or stop the deployment unit");
  examples(
    rootOption(scale.command("up").description("Start keelson-server and wait until it is ready")),
    "keelson advanced-ddu scale-du up",
  ).action(
    run(async (options) => {
      const o = options as { root?: string };
      const { layout, service } = context(o.root, env);
      say.note(
        `will start keelson-server ${currentVersion(layout) ?? ""} (${service.kind}) and wait until it is ready`,
      );
      await startAndSay(layout, service, say);
    }),
  );

  examples(
    rootOption(
      program
        .command("upgrade-du")
        .description("Rewrite keelson-server.service for the current release and restart it"),
    ),
    "keelson upgrade-du",
  ).action(
    run(async (options) => {
      const o = options as { root?: string };
      const { layout, service } = context(o.root, env);
      const manifest = readReleaseManifest(layout.current);
      say.note(`will rewrite ${layout.unitFile} for keelson ${manifest.version} and restart keelson-server`);
      writeFileSync(layout.unitFile, serverUnit(layout, manifest.entries.server));
      await service.stop();
      await startAndSay(layout, service, say);
    }),
  );
  return program;
}

/** `configure-localhost`: the settings changed in server.env, a running server restarted on them (or put back). */
async function configureLocalhost(
  layout: Layout,
  service: ServiceManager,
  o: LocalhostOptions,
  say: Say,
): Promise<void> {
  if (!existsSync(layout.serverEnv))
    throw new CliError(`${layout.serverEnv} does not exist: run keelson install control-plane first`);
  const before = readFileSync(layout.serverEnv, "utf8");
  const current = readEnvFile(layout.serverEnv);
  const wanted = localhostSettings(current, o);
  if (Object.keys(wanted).length === 0)
    throw usageError("nothing to configure: give --ipv4, --ipv6, --port, --lb-url or --lb-addresses");
  const changes = Object.entries(wanted).filter(([key, value]) => current[key] !== value);
  if (changes.length === 0) {
    say.note(`${layout.serverEnv} has these settings already: nothing to do`);
    return;
  }
  const running = service.health().running;
  say.note(
    `will set in ${layout.serverEnv}:\n${changes.map(([k, v]) => `  ${k}: ${current[k] ?? "(unset)"} -> ${v}`).join("\n")}\n` +
      (running
        ? "and restart keelson-server on them"
        : "(keelson-server is not running: they apply at its next start)"),
  );
  updateEnvFile(layout.serverEnv, Object.fromEntries(changes));
  say.note(`set ${changes.map(([k]) => k).join(", ")}`);
  if (!running) return;
  await service.stop();
  const ready = await startAndWait(layout, service, 120_000);
  if (ready.ready) {
    say.note(`keelson-server ${currentVersion(layout)} restarted and ready at ${serverApiUrl(layout)}`);
    return;
  }
  const failure = `${failureOf(service.logTail(200))} (${ready.status})`;
  await service.stop();
  writeFileSync(layout.serverEnv, before, { mode: 0o600 });
  const back = await startAndWait(layout, service, 120_000);
  throw new CliError(
    `keelson-server did not become ready on the new settings: ${failure}; ${layout.serverEnv} put back as it was` +
      (back.ready ? " and keelson-server started again on it" : `, and it did not start again either (${back.status})`),
  );
}

/** `scale-du up` and `upgrade-du`: started, ready, or the failure named. */
async function startAndSay(layout: Layout, service: ServiceManager, say: Say): Promise<void> {
  const ready = await startAndWait(layout, service, 120_000);
  if (!ready.ready)
    throw new CliError(`keelson-server did not become ready: ${failureOf(service.logTail(200))} (${ready.status})`);
  say.note(`keelson-server ${currentVersion(layout)} is ready (${ready.agentLinks} agents connected)`);
}

/** Runs a local command line: exit 0 done, 1 failed or refused (the message says why), 2 usage. */
export async function runLocal(argv: readonly string[], term: Terminal): Promise<number> {
  let code: number = EXIT.ok;
  const say: Say = {
    note: (text) => term.write("stderr", `${text}\n`),
    print: (text) => term.write("stdout", `${text}\n`),
  };
  const program = localProgram({ path: term.env.PATH ?? "/usr/bin:/bin", say }, (fn) => async (...args) => {
    try {
      await fn(...args);
    } catch (error) {
      term.write(
        "stderr",
        `error: ${error instanceof Error && error instanceof CliError ? error.message : ((error as Error).stack ?? String(error))}\n`,
      );
      code = error instanceof CliError ? error.exitCode : EXIT.failed;
    }
  });
  return (await parseCommandLine(program, argv, term)) ?? code;
}
