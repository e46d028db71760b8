import { checkHttpUrl, HTTP_URL_RULE, parseSettings } from "@keelson/settings";
import { type Static, Type } from "typebox";

/**
 * Every setting of `keelson`, the operator CLI, in one schema. Each may come from its flag
 * (`--url`), its environment variable, or the current context of the config file, in that
 * order; `main.ts` parses flags and environment once, `connection.ts` fills the gaps from the
 * config file. Everything is optional here: which settings a command needs depends on the
 * command (`config get-contexts` needs none, `clusters list` a URL and a token).
 */
export const CliSettingsSchema = Type.Object({
  url: Type.Optional(
    Type.String({
      env: "KEELSON_URL",
      check: checkHttpUrl,
      rule: HTTP_URL_RULE,
      defaultText: "the current context's",
      description: "The control plane's URL.",
    }),
  ),
  token: Type.Optional(
    Type.String({
      env: "KEELSON_TOKEN",
      secret: true,
      rule: "text",
      defaultText: "the current context's (stored by `keelson login`)",
      description: "An X-Auth-Token: a login token, a project token or the admin token.",
    }),
  ),
  project: Type.Optional(
    Type.String({
      env: "KEELSON_PROJECT",
      rule: "a project name or id",
      defaultText: "the current context's, else `default`",
      description: "The project the commands act in.",
    }),
  ),
  config: Type.Optional(
    Type.String({
      env: "KEELSON_CONFIG",
      rule: "a file (created by `login` and `config set-context`, mode 0600)",
      defaultText: "`~/.config/keelson/config.yaml`",
      description: "The config file with the named contexts.",
    }),
  ),
  context: Type.Optional(
    Type.String({
      env: "KEELSON_CONTEXT",
      rule: "a context name",
      defaultText: "the config file's current-context",
      description: "Which context of the config file to use.",
    }),
  ),
  caFile: Type.Optional(
    Type.String({
      env: "KEELSON_CA_FILE",
      rule: "a readable PEM file",
      defaultText: "the current context's, else the system's CAs",
      description: "CA certificates to trust for an https:// control plane.",
    }),
  ),
  requestTimeoutMs: Type.Integer({
    env: "KEELSON_REQUEST_TIMEOUT_MS",
    default: 30_000,
    minimum: 100,
    maximum: 600_000,
    unit: "milliseconds",
    description: "Limit of one API request (not of following an operation).",
  }),
  reconnectTimeoutMs: Type.Integer({
    env: "KEELSON_RECONNECT_TIMEOUT_MS",
    default: 60_000,
    minimum: 1_000,
    maximum: 3_600_000,
    unit: "milliseconds",
    description:
      "How long a command following an operation reconnects its dropped events stream (0.5 s doubling to 5 s apart) before it gives up.",
  }),
  noColor: Type.Optional(
    Type.String({
      env: "NO_COLOR",
      rule: "any text (no-color.org)",
      description: "Any value turns colours off; they are only ever used on a terminal.",
    }),
  ),
});

export type CliSettings = Readonly<Static<typeof CliSettingsSchema>>;

/** The flags of the global options as commander parsed them, by setting key. */
export type SettingFlags = Partial<Record<keyof CliSettings, string | boolean | undefined>>;

const FLAGS: Record<keyof CliSettings, string> = {
  url: "--url",
  token: "--token",
  project: "--project",
  config: "--config",
  context: "--context",
  caFile: "--ca-file",
  requestTimeoutMs: "--request-timeout-ms",
  reconnectTimeoutMs: "--reconnect-timeout-ms",
  noColor: "--no-color",
};

/**
 * Parses the settings once: the flags commander collected are handed to the shared parser as
 * its command line, so a flag and its variable get the same checks and messages.
 */
export function readCliSettings(env: Record<string, string | undefined>, flags: SettingFlags): CliSettings {
  const argv: string[] = [];
  for (const [key, flag] of Object.entries(FLAGS) as [keyof CliSettings, string][]) {
    const value = flags[key];
    if (value === undefined || value === false) continue;
    argv.push(flag, value === true ? "1" : value);
  }
  return parseSettings(CliSettingsSchema, { env, argv });
}
