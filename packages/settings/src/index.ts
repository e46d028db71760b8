/**
 * One parser for every Keelson binary's settings. Each binary declares ONE TypeBox object
 * schema whose properties carry the setting's environment variable (`env`), what it means
 * (`description`), its unit and default; `parseSettings` reads the environment and the command
 * line once, at start, and hands back a typed, frozen object that is passed down from there.
 * No module reads `process.env` for a setting of its own: a test checks that.
 *
 * Text is trimmed and an empty value counts as unset (a unit file's `KEY=` line, a blank flag).
 * Flags are the variable's name without `KEELSON_`, lower case with dashes (`--data-dir`), and
 * win over the environment. A bad value is a `SettingsError` naming the variable (or flag), the
 * value and the rule; binaries turn it into exit 78 (EX_CONFIG), which systemd does not retry
 * in a tight loop.
 */
import { type Static, type TObject, type TSchema, Type } from "typebox";

/** What a setting's schema carries besides its type, range and default. */
export interface SettingMeta {
  /** The environment variable, e.g. `KEELSON_LISTEN`. */
  env: string;
  /** One line for the README table and error messages. */
  description: string;
  /** Unit of a number (`milliseconds`, `hours`), shown in the table and in range errors. */
  unit?: string;
  /** A rule that the type cannot say (a URL, host:port); returns what is wrong, or undefined. */
  check?: (value: string) => string | undefined;
  /** How the rule reads in the table, for settings with a `check`. */
  rule?: string;
  /** Never echo the value (tokens, passwords): errors say `(hidden)`. */
  secret?: boolean;
  /** The default as the README shows it when the schema's own default is computed elsewhere. */
  defaultText?: string;
}

export class SettingsError extends Error {
  override name = "SettingsError";
}

/** The exit code of a process stopped by a bad setting (sysexits.h EX_CONFIG). */
export const SETTINGS_EXIT_CODE = 78;

type SettingSchema = TSchema & Partial<SettingMeta> & Record<string, unknown>;

/** The flag that sets the variable: `KEELSON_DATA_DIR` → `data-dir`. */
export function flagName(env: string): string {
  return env
    .replace(/^KEELSON_/, "")
    .toLowerCase()
    .replaceAll("_", "-");
}

export interface SettingsSource<S> {
  env: Record<string, string | undefined>;
  argv?: readonly string[];
  /**
   * Cross-setting rules (e.g. a minimum that must not exceed a maximum), run after every single
   * value passed: return what is wrong, naming the variables.
   */
  check?: (settings: S) => string | undefined;
  /**
   * "ignore": flags of no setting here are skipped (with the next word when it is not a flag)
   * instead of refused; for a launcher that passes its command line on to a program that checks it.
   */
  otherFlags?: "refuse" | "ignore";
}

/** Reads and checks every setting of `schema` once; throws `SettingsError` on the first bad one. */
export function parseSettings<T extends TObject>(schema: T, source: SettingsSource<Static<T>>): Readonly<Static<T>> {
  const flags = parseFlags(source.argv ?? [], schema, source.otherFlags ?? "refuse");
  const required = new Set<string>((schema as { required?: string[] }).required ?? []);
  const out: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(schema.properties) as [string, SettingSchema][]) {
    const env = metaOf(key, property).env;
    const fromFlag = flags.get(flagName(env));
    const raw = (fromFlag ?? source.env[env])?.trim();
    const name = fromFlag === undefined ? env : `--${flagName(env)}`;
    if (raw === undefined || raw === "") {
      if (property.default === undefined && required.has(key)) {
        throw new SettingsError(`${env} is required: ${property.description}`);
      }
      // An unset optional setting is there as undefined, so the object lists every setting.
      out[key] = property.default;
      continue;
    }
    out[key] = convert(name, raw, property);
  }
  const problem = source.check?.(out as Static<T>);
  if (problem) throw new SettingsError(problem);
  return Object.freeze(out) as Readonly<Static<T>>;
}

/** The settings as a Markdown table: variable, flag, default, rule, meaning. */
export function settingsTable(schema: TObject): string {
  const rows = ["| variable | flag | default | rule | meaning |", "|---|---|---|---|---|"];
  const required = new Set<string>((schema as { required?: string[] }).required ?? []);
  for (const [key, property] of Object.entries(schema.properties) as [string, SettingSchema][]) {
    const meta = metaOf(key, property);
    const unset = required.has(key) ? "required" : "unset";
    const fallback = meta.defaultText ?? (property.default === undefined ? unset : `\`${String(property.default)}\``);
    const cells = [`\`${meta.env}\``, `\`--${flagName(meta.env)}\``, fallback, ruleOf(property), meta.description];
    rows.push(`| ${cells.map((cell) => cell.replaceAll("|", "\\|")).join(" | ")} |`);
  }
  return rows.join("\n");
}

function metaOf(key: string, property: SettingSchema): SettingMeta {
  if (typeof property.env !== "string" || typeof property.description !== "string") {
    throw new Error(`setting ${key} declares no env variable or description`);
  }
  return property as unknown as SettingMeta;
}

function convert(name: string, raw: string, property: SettingSchema): unknown {
  const shown = property.secret ? "(hidden)" : JSON.stringify(raw);
  const fail = (): never => {
    throw new SettingsError(`${name}=${shown}: must be ${ruleOf(property)}`);
  };
  const choices = choicesOf(property);
  if (choices) return choices.includes(raw) ? raw : fail();
  switch (property.type) {
    case "integer":
    case "number": {
      const pattern = property.type === "integer" ? /^-?\d+$/ : /^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i;
      const value = Number(raw);
      if (!pattern.test(raw) || !Number.isFinite(value)) return fail();
      if (typeof property.minimum === "number" && value < property.minimum) return fail();
      if (typeof property.maximum === "number" && value > property.maximum) return fail();
      if (typeof property.exclusiveMinimum === "number" && value <= property.exclusiveMinimum) return fail();
      return value;
    }
    case "boolean": {
      const text = raw.toLowerCase();
      if (["1", "true", "yes", "on"].includes(text)) return true;
      if (["0", "false", "no", "off"].includes(text)) return false;
      return fail();
    }
    default: {
      const problem = property.check?.(raw);
      if (problem) throw new SettingsError(`${name}=${shown}: ${problem}`);
      return raw;
    }
  }
}

function choicesOf(property: SettingSchema): string[] | undefined {
  const anyOf = property.anyOf as { const?: unknown }[] | undefined;
  if (!Array.isArray(anyOf) || !anyOf.every((option) => typeof option.const === "string")) return undefined;
  return anyOf.map((option) => option.const as string);
}

/** The rule a value must follow, in words: for the table and for every error. */
function ruleOf(property: SettingSchema): string {
  const choices = choicesOf(property);
  if (choices) return `one of ${choices.join(", ")}`;
  const unit = property.unit ? ` (${property.unit})` : "";
  switch (property.type) {
    case "integer":
    case "number": {
      const noun = property.type === "integer" ? "an integer" : "a number";
      const min = property.minimum ?? property.exclusiveMinimum;
      const above = property.exclusiveMinimum !== undefined ? "above" : "of at least";
      if (min !== undefined && property.maximum !== undefined) {
        return property.exclusiveMinimum !== undefined
          ? `${noun} above ${min} and at most ${property.maximum}${unit}`
          : `${noun} from ${min} to ${property.maximum}${unit}`;
      }
      if (min !== undefined) return `${noun} ${above} ${min}${unit}`;
      return `${noun}${unit}`;
    }
    case "boolean":
      return "true or false (also 1/0, yes/no, on/off)";
    default:
      return property.rule ?? "text";
  }
}

/**
 * `--name value` and `--name=value`; a boolean setting's flag may stand alone (`--print-summary`).
 * Unknown flags are an error: a mistyped flag silently ignored is a setting silently not set.
 */
function parseFlags(argv: readonly string[], schema: TObject, other: "refuse" | "ignore"): Map<string, string> {
  const known = new Map<string, SettingSchema>();
  for (const [key, property] of Object.entries(schema.properties) as [string, SettingSchema][]) {
    known.set(flagName(metaOf(key, property).env), property);
  }
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const eq = arg.indexOf("=");
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const property = arg.startsWith("--") ? known.get(name) : undefined;
    if (!property && other === "ignore") {
      if (eq === -1 && argv[i + 1] !== undefined && !argv[i + 1]?.startsWith("--")) i++;
      continue;
    }
    if (!arg.startsWith("--")) throw new SettingsError(`unexpected argument "${arg}" (settings are --name value)`);
    if (!property) {
      throw new SettingsError(`unknown flag --${name} (known: ${[...known.keys()].map((k) => `--${k}`).join(", ")})`);
    }
    if (eq !== -1) {
      flags.set(name, arg.slice(eq + 1));
      continue;
    }
    const next = argv[i + 1];
    if (property.type === "boolean" && (next === undefined || next.startsWith("--"))) {
      flags.set(name, "true");
      continue;
    }
    if (next === undefined) throw new SettingsError(`--${name} needs a value`);
    flags.set(name, next);
    i++;
  }
  return flags;
}

/** `host:port` or `[v6]:port`; the rule of every listen setting. */
export function parseListen(listen: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(listen.trim());
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port < 0 || port > 65535) return undefined;
  return { host: match[1] ?? (match[2] || "127.0.0.1"), port };
}

export const LISTEN_RULE = "host:port (a port from 0 to 65535; [v6]:port for IPv6)";
export const checkListen = (value: string): string | undefined =>
  parseListen(value) ? undefined : `must be ${LISTEN_RULE}`;

export const HTTP_URL_RULE = "an http:// or https:// URL";
export function checkHttpUrl(value: string): string | undefined {
  try {
    const url = new URL(value);
    if ((url.protocol === "http:" || url.protocol === "https:") && url.host) return undefined;
  } catch {
    // falls through to the rule
  }
  return `must be ${HTTP_URL_RULE}`;
}

/** Pino's levels: the log level rule of every binary. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * The settings every binary declares alike, so their rules and wording are written once; used
 * in a schema like TypeBox's own builders: `listen: Setting.listen("KEELSON_LISTEN", ...)`.
 */
export const Setting = {
  /** A `host:port` to listen on. */
  listen(env: string, fallback: string, description: string) {
    return Type.String({ env, default: fallback, check: checkListen, rule: LISTEN_RULE, description });
  },

  /** An http:// or https:// URL; `more` adds what the README says when it is unset (`defaultText`). */
  httpUrl(env: string, description: string, more: Pick<SettingMeta, "defaultText"> = {}) {
    return Type.String({ env, check: checkHttpUrl, rule: HTTP_URL_RULE, ...more, description });
  },

  /** `NODE_ENV`: both ends of the agent link check the frames they send unless it is `production`. */
  nodeEnv() {
    return Type.Optional(
      Type.String({
        env: "NODE_ENV",
        rule: "text",
        description:
          "`production` skips the check of outgoing agent-link frames against the protocol schemas (about 70 µs for a 21-phase node report); any other value or none keeps it.",
      }),
    );
  },

  /** `KEELSON_LOG_LEVEL`, one of LOG_LEVELS. */
  logLevel() {
    return Type.Union(
      LOG_LEVELS.map((level) => Type.Literal(level)),
      { env: "KEELSON_LOG_LEVEL", default: "info", description: "Log level (JSON lines on stdout)." },
    );
  },
};
