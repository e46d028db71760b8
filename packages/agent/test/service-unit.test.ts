import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const unitFile = resolve(import.meta.dirname, "..", "..", "..", "scripts", "keelson-agent.service");

/** Section -> key -> values (a key may repeat). Comments and blank lines dropped. */
function parseUnit(text: string): Record<string, Record<string, string[]>> {
  const sections: Record<string, Record<string, string[]>> = {};
  let current: Record<string, string[]> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      const name = header[1] as string;
      current = sections[name] ?? {};
      sections[name] = current;
      continue;
    }
    const eq = line.indexOf("=");
    if (!current || eq < 1) throw new Error(`unparsable unit line: ${line}`);
    const key = line.slice(0, eq).trim();
    const values = current[key] ?? [];
    values.push(line.slice(eq + 1).trim());
    current[key] = values;
  }
  return sections;
}

const hasSystemdAnalyze = spawnSync("systemd-analyze", ["--version"], { stdio: "ignore" }).status === 0;

describe("systemd unit scripts/keelson-agent.service", () => {
  const unit = parseUnit(readFileSync(unitFile, "utf8"));
  const service = unit.Service ?? {};

  it("has the settings the agent relies on", () => {
    expect(service.Type).toEqual(["exec"]);
    expect(service.Restart).toEqual(["on-failure"]);
    expect(service.KillMode).toEqual(["mixed"]);
    expect(service.StateDirectory).toEqual(["keelson-agent"]);
    expect(service.EnvironmentFile).toEqual(["-/etc/keelson/agent.env"]);
    expect(service.Environment).toEqual(["NODE_ENV=production"]);
    // Refusals and bad configuration (upgrade/ipc.ts AUTH_EXIT_CODE, CONFIG_EXIT_CODE) are not retried.
    expect(service.RestartPreventExitStatus?.[0]?.split(/\s+/).sort()).toEqual(["77", "78"]);
    // The install script's layout (GET /v1/install/agent.sh): the packed launcher of the current version.
    expect(service.ExecStart?.[0]).toBe("/usr/bin/env node /opt/keelson/agent/current/launcher.mjs");
    expect(unit.Install?.WantedBy).toEqual(["multi-user.target"]);
    expect(unit.Unit?.After).toContain("network-online.target");
  });

  // Where systemd is installed (CI images with it, every systemd host) the real verifier runs;
  // the assertions above hold either way.
  it(`passes systemd-analyze verify${hasSystemdAnalyze ? "" : " (systemd-analyze not installed: checked by parsing only)"}`, () => {
    if (!hasSystemdAnalyze) {
      expect(Object.keys(unit).sort()).toEqual(["Install", "Service", "Unit"]);
      return;
    }
    const output = execFileSync("systemd-analyze", ["verify", unitFile], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(output).toBe("");
  });
});
