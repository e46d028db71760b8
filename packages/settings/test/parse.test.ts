import { Type } from "typebox";
import { describe, expect, it } from "vitest";
import { checkListen, flagName, parseSettings, SettingsError, settingsTable } from "../src/index.ts";

const Schema = Type.Object({
  listen: Type.String({ env: "KEELSON_LISTEN", default: "127.0.0.1:8080", check: checkListen, description: "where" }),
  heartbeatMs: Type.Integer({
    env: "KEELSON_HEARTBEAT_MS",
    default: 15_000,
    minimum: 100,
    maximum: 60_000,
    unit: "milliseconds",
    description: "ping",
  }),
  ratio: Type.Number({ env: "KEELSON_RATIO", default: 1.5, exclusiveMinimum: 0, description: "ratio" }),
  verbose: Type.Boolean({ env: "KEELSON_VERBOSE", default: false, description: "chatty" }),
  level: Type.Union([Type.Literal("info"), Type.Literal("debug")], {
    env: "KEELSON_LEVEL",
    default: "info",
    description: "level",
  }),
  token: Type.Optional(Type.String({ env: "KEELSON_TOKEN", secret: true, description: "secret" })),
  url: Type.String({ env: "KEELSON_URL", description: "required one" }),
});

const base = { KEELSON_URL: "http://x" };
const parse = (env: Record<string, string | undefined>, argv: string[] = []) =>
  parseSettings(Schema, { env: { ...base, ...env }, argv });

describe("parseSettings", () => {
  it("applies defaults, lists unset optional settings as undefined and freezes the result", () => {
    const s = parse({});
    expect(s).toEqual({
      listen: "127.0.0.1:8080",
      heartbeatMs: 15_000,
      ratio: 1.5,
      verbose: false,
      level: "info",
      token: undefined,
      url: "http://x",
    });
    expect("token" in s).toBe(true);
    expect(Object.isFrozen(s)).toBe(true);
  });

  it("converts text to the setting's type, trims it, and counts an empty value as unset", () => {
    const s = parse({
      KEELSON_HEARTBEAT_MS: " 2000 ",
      KEELSON_RATIO: "0.25",
      KEELSON_VERBOSE: "yes",
      KEELSON_LEVEL: "debug",
      KEELSON_TOKEN: "",
    });
    expect(s).toMatchObject({ heartbeatMs: 2000, ratio: 0.25, verbose: true, level: "debug", token: undefined });
    for (const [text, value] of [
      ["1", true],
      ["on", true],
      ["TRUE", true],
      ["0", false],
      ["off", false],
      ["no", false],
    ] as const) {
      expect(parse({ KEELSON_VERBOSE: text }).verbose).toBe(value);
    }
  });

  it("lets a flag win over the variable, in both --name value and --name=value forms", () => {
    expect(flagName("KEELSON_HEARTBEAT_MS")).toBe("heartbeat-ms");
    const s = parse({ KEELSON_HEARTBEAT_MS: "2000", KEELSON_LISTEN: "0.0.0.0:1" }, [
      "--heartbeat-ms",
      "3000",
      "--listen=[::1]:9000",
      "--verbose",
    ]);
    expect(s).toMatchObject({ heartbeatMs: 3000, listen: "[::1]:9000", verbose: true });
  });

  it("names the variable (or flag), the value and the rule of a bad value", () => {
    const cases: [Record<string, string>, string[], string][] = [
      [
        { KEELSON_HEARTBEAT_MS: "abc" },
        [],
        'KEELSON_HEARTBEAT_MS="abc": must be an integer from 100 to 60000 (milliseconds)',
      ],
      [
        { KEELSON_HEARTBEAT_MS: "99" },
        [],
        'KEELSON_HEARTBEAT_MS="99": must be an integer from 100 to 60000 (milliseconds)',
      ],
      [{ KEELSON_HEARTBEAT_MS: "1.5" }, [], "must be an integer"],
      [{}, ["--heartbeat-ms", "70000"], '--heartbeat-ms="70000": must be an integer from 100 to 60000'],
      [{ KEELSON_RATIO: "0" }, [], 'KEELSON_RATIO="0": must be a number above 0'],
      [{ KEELSON_RATIO: "Infinity" }, [], 'KEELSON_RATIO="Infinity"'],
      [{ KEELSON_VERBOSE: "maybe" }, [], 'KEELSON_VERBOSE="maybe": must be true or false'],
      [{ KEELSON_LEVEL: "loud" }, [], 'KEELSON_LEVEL="loud": must be one of info, debug'],
      [{ KEELSON_LISTEN: "8080" }, [], 'KEELSON_LISTEN="8080": must be host:port'],
      [{ KEELSON_URL: "" }, [], "KEELSON_URL is required: required one"],
      [{}, ["--heartbeat"], "unknown flag --heartbeat (known: --listen, --heartbeat-ms"],
      [{}, ["stray"], 'unexpected argument "stray"'],
      [{}, ["--listen"], "--listen needs a value"],
    ];
    for (const [env, argv, message] of cases) {
      expect(() => parse(env, argv), message).toThrow(SettingsError);
      expect(() => parse(env, argv)).toThrow(message);
    }
  });

  it("never echoes a secret's value", () => {
    const Secret = Type.Object({
      password: Type.Integer({ env: "KEELSON_PIN", secret: true, minimum: 0, description: "pin" }),
    });
    expect(() => parseSettings(Secret, { env: { KEELSON_PIN: "hunter2" } })).toThrow(
      "KEELSON_PIN=(hidden): must be an integer of at least 0",
    );
  });

  it("runs the cross-setting check after the single values", () => {
    expect(() =>
      parseSettings(Schema, { env: base, check: (s) => (s.heartbeatMs > 10_000 ? "heartbeat too slow" : undefined) }),
    ).toThrow("heartbeat too slow");
  });

  it("with otherFlags ignore, skips flags of other settings and their values", () => {
    const Part = Type.Object({ level: Schema.properties.level });
    expect(
      parseSettings(Part, { env: {}, argv: ["--hostname", "a", "--level", "debug", "--flag"], otherFlags: "ignore" }),
    ).toEqual({ level: "debug" });
  });
});

describe("settingsTable", () => {
  it("renders one row per setting with its variable, flag, default and rule", () => {
    const table = settingsTable(Schema).split("\n");
    expect(table[0]).toBe("| variable | flag | default | rule | meaning |");
    expect(table).toContain(
      "| `KEELSON_HEARTBEAT_MS` | `--heartbeat-ms` | `15000` | an integer from 100 to 60000 (milliseconds) | ping |",
    );
    expect(table).toContain("| `KEELSON_URL` | `--url` | required | text | required one |");
    expect(table).toContain("| `KEELSON_TOKEN` | `--token` | unset | text | secret |");
    expect(table).toHaveLength(2 + Object.keys(Schema.properties).length);
  });
});
