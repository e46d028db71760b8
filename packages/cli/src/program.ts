import { Command, CommanderError } from "commander";
import { auditCommands } from "./commands/audit.ts";
import { clusterActionCommands } from "./commands/cluster-actions.ts";
import { clusterCommands } from "./commands/clusters.ts";
import { ownsConfig } from "./commands/common.ts";
import { completionCommand } from "./commands/completion.ts";
import { configCommands } from "./commands/config.ts";
import { hostStatusCommand } from "./commands/host-status.ts";
import { hostUpgradeCommands } from "./commands/host-upgrades.ts";
import { hostCommands } from "./commands/hosts.ts";
import { operationCommands } from "./commands/operations.ts";
import { isLocalCommand, runLocal } from "./commands/release.ts";
import { replicaCommands } from "./commands/replicas.ts";
import { upgradeMgmtCommand } from "./commands/upgrade-mgmt.ts";
import { CliError, EXIT } from "./errors.ts";
import { colours } from "./output.ts";
import { Cli, type Io } from "./session.ts";
import { readCliSettings, type SettingFlags } from "./settings.ts";
import { CLI_VERSION } from "./version.ts";

/**
 * The command tree. Global options are the settings (settings.ts); each command declares its
 * own options and examples. `run` returns the exit code: 0 ok, 1 failed, 2 usage, 3
 * unreachable or unauthorised (errors.ts).
 */

export interface Terminal {
  env: Record<string, string | undefined>;
  stdoutTty: boolean;
  stderrTty: boolean;
  stderrColumns(): number | undefined;
  write(stream: "stdout" | "stderr", text: string): void;
  readStdin(): Promise<string>;
  promptSecret(question: string): Promise<string | undefined>;
  onInterrupt(handler: () => void): () => void;
}

/** Builds a command's action: settings parsed once, the command run, its error turned into an exit code. */
export type Action = (cli: Cli, ...args: unknown[]) => Promise<void>;
export type Wrap = (action: Action) => (...args: unknown[]) => Promise<void>;

export function buildProgram(wrap: Wrap): Command {
  const program = new Command("keelson")
    .description("Drive a Keelson control plane: clusters, nodes, hosts, rollouts and operations.")
    .version(CLI_VERSION, "-V, --version", "print the version of keelson and exit")
    .option("--url <url>", "control plane URL (env KEELSON_URL)")
    .option("--token <token>", "X-Auth-Token to send (env KEELSON_TOKEN)")
    .option("--project <name-or-id>", "project to act in (env KEELSON_PROJECT)")
    .option("--config <file>", "config file (env KEELSON_CONFIG, default ~/.config/keelson/config.yaml)")
    .option("--context <name>", "context of the config file to use (env KEELSON_CONTEXT)")
    .option("--ca-file <file>", "CA certificates to trust for https (env KEELSON_CA_FILE)")
    .option("--request-timeout-ms <ms>", "limit of one API request (env KEELSON_REQUEST_TIMEOUT_MS)")
    .option(
      "--reconnect-timeout-ms <ms>",
      "how long a dropped events stream is reconnected before giving up (env KEELSON_RECONNECT_TIMEOUT_MS)",
    )
    .option("--no-color", "no colours (also NO_COLOR); colours are only used on a terminal")
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText(
      "after",
      `
Settings come from the flags above, then the environment (KEELSON_URL, KEELSON_TOKEN,
KEELSON_PROJECT, KEELSON_CONFIG, KEELSON_CA_FILE), then the config file's current context.

Exit codes: 0 ok, 1 failed operation or refused request, 2 usage, 3 unreachable or unauthorised.

Examples:
  $ keelson login --url http://127.0.0.1:8080 --user alice --project default
  $ keelson clusters list
  $ keelson clusters create -f demo.yaml
  $ keelson restart demo --workers --batch-percent 25
  $ keelson operations watch 3f2c

On the control plane's host: keelson install control-plane | download | install VERSION |
upgrade --config FILE [--plan] | stop | rollback --dir DIR | advanced-ddu scale-du up | upgrade-du
(each with --help). Through the API (admin token): advanced-ddu upgrade-mgmt --config SPEC,
configure-hosts and upgrade-hosts --config FILE.`,
    );
  configCommands(program, wrap);
  clusterCommands(program, wrap);
  hostCommands(program, wrap);
  clusterActionCommands(program, wrap);
  operationCommands(program, wrap);
  replicaCommands(program, wrap);
  auditCommands(program, wrap);
  hostStatusCommand(program, wrap);
  hostUpgradeCommands(program, wrap);
  upgradeMgmtCommand(program, wrap);
  completionCommand(program, wrap);
  return program;
}

export async function run(argv: readonly string[], term: Terminal): Promise<number> {
  // install, download, upgrade --config, stop, rollback, advanced-ddu, upgrade-du: the local installation's.
  if (isLocalCommand(argv)) return runLocal(argv, term);
  let code: number = EXIT.ok;
  let cli: Cli | undefined;
  const fail = (error: unknown) => {
    if (error instanceof CliError) {
      if (error.exitCode !== EXIT.interrupted) term.write("stderr", `error: ${error.message}\n`);
      code = error.exitCode;
    } else {
      const err = error as Error;
      if (err.name === "SettingsError") {
        term.write("stderr", `error: ${err.message}\n`);
        code = EXIT.usage;
      } else {
        term.write("stderr", `error: ${err.stack ?? String(err)}\n`);
        code = EXIT.failed;
      }
    }
  };
  const program: Command = buildProgram((action) => async (...args) => {
    try {
      const opts = program.opts() as Record<string, string | boolean | undefined>;
      // The program takes `--config` wherever it stands, so a command whose own `--config` is
      // spec'd (spec §4.9: `upgrade-hosts --config <file>`) gets the value, and the CLI's
      // settings file comes from KEELSON_CONFIG or its default place.
      const command = args.at(-1) as Command | undefined;
      const ownConfig = command instanceof Command && ownsConfig(command);
      if (ownConfig) (args.at(-2) as Record<string, unknown>).config = opts.config;
      const flags: SettingFlags = {
        url: opts.url,
        token: opts.token,
        project: opts.project,
        config: ownConfig ? undefined : opts.config,
        context: opts.context,
        caFile: opts.caFile,
        requestTimeoutMs: opts.requestTimeoutMs,
        reconnectTimeoutMs: opts.reconnectTimeoutMs,
        noColor: opts.color === false ? "1" : undefined,
      };
      const settings = readCliSettings(term.env, flags);
      const colourOn = term.stdoutTty && !settings.noColor;
      const out = {
        print: (text: string) => term.write("stdout", `${text}\n`),
        note: (text: string) => term.write("stderr", `${text}\n`),
        colour: colours(colourOn),
        tty: term.stderrTty,
        columns: () => term.stderrColumns() || 80,
      };
      cli = new Cli(settings, {
        out,
        readStdin: term.readStdin,
        promptSecret: term.promptSecret,
        onInterrupt: term.onInterrupt,
      } satisfies Io);
      await action(cli, ...args);
    } catch (error) {
      fail(error);
    } finally {
      await cli?.close();
    }
  });
  try {
    const usage = await parseCommandLine(program, argv, term);
    if (usage !== undefined) return usage;
  } catch (error) {
    fail(error);
  }
  return code;
}

/**
 * Parses and runs a command line on the terminal's streams; returns the exit code when
 * commander ended it (help: 0, bad usage: 2), undefined when the action ran.
 */
export async function parseCommandLine(
  program: Command,
  argv: readonly string[],
  term: Terminal,
): Promise<number | undefined> {
  program.configureOutput({
    writeOut: (text) => term.write("stdout", text),
    writeErr: (text) => term.write("stderr", text),
  });
  for (const command of allCommands(program)) command.exitOverride();
  try {
    await program.parseAsync(argv, { from: "user" });
    return undefined;
  } catch (error) {
    // Help asked for (`--help`, `help CMD`) is 0; help shown for a missing subcommand is a usage error.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    throw error;
  }
}

export function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(allCommands)];
}
