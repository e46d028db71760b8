import { describe, expect, it } from "vitest";
import { ConfigError, defaultStateDir, readAgentConfig } from "../src/config.ts";

const base = { KEELSON_CONTROL_PLANE: "http://127.0.0.1:8080/" };

describe("agent configuration", () => {
  it("applies DESIGN.md's defaults", () => {
    const config = readAgentConfig(base);
    expect(config).toMatchObject({
      controlPlane: "http://127.0.0.1:8080",
      joinToken: undefined,
      stateDir: "/var/lib/keelson-agent",
      listen: { host: "127.0.0.1", port: 8082 },
      nodePackage: "/opt/keelson/node",
      hostRoot: "/",
      hostname: undefined,
      primaryIp: undefined,
      logLevel: "info",
      factsIntervalMs: 60_000,
      reconnect: { initialMs: 500, maxMs: 30_000 },
    });
  });

  it("takes systemd's STATE_DIRECTORY, and KEELSON_STATE_DIR over it", () => {
    expect(readAgentConfig({ ...base, STATE_DIRECTORY: "/var/lib/x:/var/lib/y" }).stateDir).toBe("/var/lib/x");
    expect(readAgentConfig({ ...base, STATE_DIRECTORY: "/var/lib/x", KEELSON_STATE_DIR: "/tmp/s" }).stateDir).toBe(
      "/tmp/s",
    );
    expect(defaultStateDir({})).toBe("/var/lib/keelson-agent");
  });

  it("reads every variable, and flags over variables", () => {
    const config = readAgentConfig(
      {
        ...base,
        KEELSON_JOIN_TOKEN: "kjt_x",
        KEELSON_AGENT_LISTEN: "[::1]:9000",
        KEELSON_HOSTNAME: "host-a",
        KEELSON_PRIMARY_IP: "10.0.0.7",
        KEELSON_HOST_ROOT: "/tmp/root",
        KEELSON_NODE_PACKAGE: "/tmp/pkg",
        KEELSON_LOG_LEVEL: "debug",
        KEELSON_AGENT_RECONNECT_MAX_MS: "2000",
      },
      ["--hostname", "host-b", "--agent-listen=127.0.0.1:9100"],
    );
    expect(config).toMatchObject({
      joinToken: "kjt_x",
      listen: { host: "127.0.0.1", port: 9100 },
      hostname: "host-b",
      primaryIp: "10.0.0.7",
      hostRoot: "/tmp/root",
      nodePackage: "/tmp/pkg",
      logLevel: "debug",
      reconnect: { initialMs: 500, maxMs: 2000 },
    });
  });

  it("refuses what cannot work, naming the variable", () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{}, /KEELSON_CONTROL_PLANE is required/],
      [{ KEELSON_CONTROL_PLANE: "ftp://x" }, /KEELSON_CONTROL_PLANE must be an http/],
      [{ ...base, KEELSON_AGENT_LISTEN: "8082" }, /KEELSON_AGENT_LISTEN/],
      [{ ...base, KEELSON_PRIMARY_IP: "host.example" }, /KEELSON_PRIMARY_IP/],
      [{ ...base, KEELSON_AGENT_FACTS_INTERVAL_MS: "-5" }, /KEELSON_AGENT_FACTS_INTERVAL_MS/],
      [
        { ...base, KEELSON_AGENT_RECONNECT_INITIAL_MS: "5000", KEELSON_AGENT_RECONNECT_MAX_MS: "1000" },
        /must not exceed/,
      ],
    ];
    for (const [env, message] of bad) {
      expect(() => readAgentConfig(env)).toThrow(ConfigError);
      expect(() => readAgentConfig(env)).toThrow(message);
    }
  });
});
