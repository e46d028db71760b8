import { SettingsError } from "@keelson/settings";
import { describe, expect, it } from "vitest";
import { nodeTuningOf } from "../src/node/node-config.ts";
import { readAgentSettings, readLauncherSettings } from "../src/settings.ts";

const base = { KEELSON_CONTROL_PLANE: "http://127.0.0.1:8080/" };

describe("agent settings", () => {
  it("applies DESIGN.md's defaults", () => {
    const config = readAgentSettings(base);
    expect(config).toMatchObject({
      controlPlanes: ["http://127.0.0.1:8080"],
      joinToken: undefined,
      stateDir: "/var/lib/keelson-agent",
      listen: { host: "127.0.0.1", port: 8082 },
      nodePackage: "/opt/keelson/node",
      hostRoot: "/",
      hostname: undefined,
      primaryIp: undefined,
      logLevel: "info",
      factsIntervalMs: 60_000,
      reconnectInitialMs: 500,
      reconnectMaxMs: 30_000,
      upgradeTrialMs: 60_000,
      backupMinuteMs: 60_000,
      serviceManager: undefined,
    });
  });

  it("takes several control-plane URLs comma-separated, and names a bad or repeated one (exit 78's message)", () => {
    expect(
      readAgentSettings({ KEELSON_CONTROL_PLANE: "http://10.0.0.1:8080/, https://cp-2.example:8443,http://[::1]:8080" })
        .controlPlanes,
    ).toEqual(["http://10.0.0.1:8080", "https://cp-2.example:8443", "http://[::1]:8080"]);
    expect(() => readAgentSettings({ KEELSON_CONTROL_PLANE: "http://10.0.0.1:8080,ftp://cp-2:21" })).toThrow(
      new SettingsError(
        'KEELSON_CONTROL_PLANE="http://10.0.0.1:8080,ftp://cp-2:21": entry 2 ("ftp://cp-2:21") must be an http:// or https:// URL',
      ),
    );
    expect(() => readAgentSettings({ KEELSON_CONTROL_PLANE: "http://10.0.0.1:8080,,http://10.0.0.2:8080" })).toThrow(
      /KEELSON_CONTROL_PLANE=.*: entry 2 \(""\) must be an http:\/\/ or https:\/\/ URL/,
    );
    expect(() => readAgentSettings({ KEELSON_CONTROL_PLANE: "http://10.0.0.1:8080,http://10.0.0.1:8080/" })).toThrow(
      /entry 2 \(http:\/\/10\.0\.0\.1:8080\) repeats entry 1/,
    );
  });

  it("takes control-plane pins of KEELSON_CONTROL_PLANE's names, and refuses others or non-addresses (exit 78's message)", () => {
    const planes = { KEELSON_CONTROL_PLANE: "https://cp.keelson.test:8443,https://cp-2.keelson.test:8443" };
    expect(readAgentSettings(planes).controlPlanePins).toEqual([]);
    expect(
      readAgentSettings({
        ...planes,
        KEELSON_CONTROL_PLANE_ADDRESSES: "cp.keelson.test=127.0.0.1, CP-2.keelson.test=::1",
      }).controlPlanePins,
    ).toEqual([
      { name: "cp.keelson.test", ip: "127.0.0.1" },
      { name: "CP-2.keelson.test", ip: "::1" },
    ]);
    expect(() =>
      readAgentSettings({ ...planes, KEELSON_CONTROL_PLANE_ADDRESSES: "other.keelson.test=127.0.0.1" }),
    ).toThrow(
      new SettingsError(
        "KEELSON_CONTROL_PLANE_ADDRESSES: other.keelson.test is not a host name of KEELSON_CONTROL_PLANE (cp.keelson.test, cp-2.keelson.test)",
      ),
    );
    expect(() =>
      readAgentSettings({ ...planes, KEELSON_CONTROL_PLANE_ADDRESSES: "cp.keelson.test=127.0.0.300" }),
    ).toThrow(/KEELSON_CONTROL_PLANE_ADDRESSES=.*: entry 1: "127.0.0.300" must be an IPv4 or IPv6 address/);
    expect(() => readAgentSettings({ ...planes, KEELSON_CONTROL_PLANE_ADDRESSES: "cp.keelson.test" })).toThrow(
      /KEELSON_CONTROL_PLANE_ADDRESSES=.*: entry "cp.keelson.test" must be name=ip/,
    );
    expect(() => readAgentSettings({ ...planes, KEELSON_CONTROL_PLANE_ADDRESSES: "10.0.0.1=127.0.0.1" })).toThrow(
      /entry 1: "10.0.0.1" must be a host name \(not an address\)/,
    );
  });

  it("takes systemd's STATE_DIRECTORY, and KEELSON_STATE_DIR over it", () => {
    expect(readAgentSettings({ ...base, STATE_DIRECTORY: "/var/lib/x:/var/lib/y" }).stateDir).toBe("/var/lib/x");
    expect(readAgentSettings({ ...base, STATE_DIRECTORY: "/var/lib/x", KEELSON_STATE_DIR: "/tmp/s" }).stateDir).toBe(
      "/tmp/s",
    );
    expect(readLauncherSettings({}).stateDir).toBe("/var/lib/keelson-agent");
    expect(readLauncherSettings({ STATE_DIRECTORY: "/var/lib/x" }).stateDir).toBe("/var/lib/x");
  });

  it("reads every variable, and flags over variables", () => {
    const config = readAgentSettings(
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
      reconnectInitialMs: 500,
      reconnectMaxMs: 2000,
    });
  });

  it("refuses what cannot work, naming the variable", () => {
    const bad: [Record<string, string>, RegExp, string[]?][] = [
      [{}, /KEELSON_CONTROL_PLANE is required/],
      [
        { KEELSON_CONTROL_PLANE: "ftp://x" },
        /KEELSON_CONTROL_PLANE="ftp:\/\/x": must be an http:\/\/ or https:\/\/ URL/,
      ],
      [{ ...base, KEELSON_AGENT_LISTEN: "8082" }, /KEELSON_AGENT_LISTEN/],
      [{ ...base, KEELSON_PRIMARY_IP: "host.example" }, /KEELSON_PRIMARY_IP/],
      [
        { ...base, KEELSON_AGENT_FACTS_INTERVAL_MS: "-5" },
        /KEELSON_AGENT_FACTS_INTERVAL_MS="-5": must be an integer of at least 1 \(milliseconds\)/,
      ],
      [
        { ...base, KEELSON_SERVICE_MANAGER: "upstart" },
        /KEELSON_SERVICE_MANAGER="upstart": must be one of direct, systemd/,
      ],
      [{ ...base, KEELSON_BACKUP_MINUTE_MS: "5" }, /KEELSON_BACKUP_MINUTE_MS/],
      [{ ...base, KEELSON_JOIN_TOKEN: "x" }, /unknown flag --bogus/, ["--bogus", "1"]],
      [
        { ...base, KEELSON_AGENT_RECONNECT_INITIAL_MS: "5000", KEELSON_AGENT_RECONNECT_MAX_MS: "1000" },
        /must not exceed/,
      ],
    ];
    for (const [env, message, argv] of bad) {
      expect(() => readAgentSettings(env, argv)).toThrow(SettingsError);
      expect(() => readAgentSettings(env, argv)).toThrow(message);
    }
  });
});

describe("node knobs", () => {
  it("reads the reconcile pace, host-check roots and timeouts, and refuses nonsense naming the variable", () => {
    const defaults = nodeTuningOf(readAgentSettings(base));
    expect(defaults).toEqual({
      reconcile: {
        checkIntervalMs: 30_000,
        retryIntervalMs: 2_000,
        maxRetryIntervalMs: 60_000,
        retryBudget: 10,
        fullRestartEvery: 3,
        failedRetryIntervalMs: 120_000,
      },
      timeouts: { serviceStartMs: 30_000, waitForServicesMs: 120_000, commandMs: 30_000, serviceStopMs: 10_000 },
      hostChecks: { procRoot: "/proc", sysRoot: "/sys" },
      regenerateCerts: false,
    });
    const tuned = nodeTuningOf(
      readAgentSettings({
        ...base,
        KEELSON_NODE_RETRY_BUDGET: "0",
        KEELSON_NODE_CHECK_INTERVAL_MS: "500",
        KEELSON_NODE_PROC_ROOT: "/tmp/proc",
        KEELSON_NODE_SERVICE_START_MS: "2000",
        KEELSON_REGENERATE_CERTS: "1",
      }),
    );
    expect(tuned).toMatchObject({
      reconcile: { retryBudget: 0, checkIntervalMs: 500 },
      timeouts: { serviceStartMs: 2000 },
      hostChecks: { procRoot: "/tmp/proc" },
      regenerateCerts: true,
    });
    expect(() => readAgentSettings({ ...base, KEELSON_NODE_CHECK_INTERVAL_MS: "0" })).toThrow(
      /KEELSON_NODE_CHECK_INTERVAL_MS="0": must be an integer of at least 1/,
    );
    expect(() => readAgentSettings({ ...base, KEELSON_REGENERATE_CERTS: "maybe" })).toThrow(/KEELSON_REGENERATE_CERTS/);
  });
});
