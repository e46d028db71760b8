import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { writeOciArchive } from "../../../test/support/oci-image.ts";
import { fakeAgentPackage } from "../../control-plane/test/agent-package-fixtures.ts";
import { ADMIN_TOKEN } from "../../control-plane/test/helpers.ts";
import { type Fleet, startFleet } from "../../control-plane/test/membership-harness.ts";
import type { HostStatus } from "../src/commands/host-status.ts";
import { keelson } from "./run-cli.ts";

/**
 * `keelson host-status`, `configure-hosts` and `upgrade-hosts` (spec §4.9, step 4) through the
 * real binary against a control plane with three simulated agents: the upgrade touches only the
 * hosts asked for, and host-status shows it; configure-hosts stages image archives. Also `operations get` by a whole uuid (the
 * single-operation route) and `--version`.
 */
vi.setConfig({ testTimeout: 180_000 });

let f: Fleet;
let dir: string;
let env: Record<string, string>;
const names: string[] = [];

beforeAll(async () => {
  f = await startFleet(3, { namePrefix: "hst" });
  for (let i = 0; i < 3; i++) names.push(f.agent(i).hostname);
  dir = mkdtempSync(join(tmpdir(), "keelson-cli-hosts-"));
  env = { KEELSON_URL: f.base, KEELSON_TOKEN: ADMIN_TOKEN, KEELSON_CONFIG: join(dir, "config.yaml"), HOME: dir };
  writeFileSync(join(dir, "keelson-agent-7.1.0.tar.gz"), fakeAgentPackage("7.1.0"));
}, 60_000);
afterAll(async () => {
  await f?.close();
  rmSync(dir, { recursive: true, force: true });
});

const statuses = async (): Promise<HostStatus[]> => {
  const res = await keelson(["host-status", "-o", "json"], { env });
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout) as HostStatus[];
};

describe("the hosts' side of the CLI", () => {
  it("host-status: name, IP, UUID, agent version, kube version, status per host, as a table and as JSON", async () => {
    const before = await statuses();
    expect(before.map((h) => h.name).sort()).toEqual([...names].sort());
    const first = before.find((h) => h.name === names[0]);
    expect(first).toMatchObject({ uuid: f.id(0), hostAgentVersion: f.agent(0).agentVersion, status: "running" });
    expect(first?.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const table = await keelson(["host-status"], { env });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^NAME\s+IP\s+UUID\s+HOST AGENT\s+KUBE\s+STATUS/);
    expect(table.stdout).toMatch(new RegExp(`${names[1]}\\s+\\S+\\s+${f.id(1)}\\s+${f.agent(1).agentVersion}`));
  });

  it("upgrade-hosts on two of three hosts changes only those two", async () => {
    const [a, b, c] = names as [string, string, string];
    const config = join(dir, "hosts.yaml");
    const reported = await statuses();
    const ipOf = (i: number) => reported.find((h) => h.name === names[i])?.ip;
    writeFileSync(
      config,
      `hostAgentRepo: keelson-agent-7.1.0.tar.gz\nbatchSize: 1\nhosts:\n  - {name: ${a}, ip: ${ipOf(0)}}\n  - ${b}\n  - ${c}\n`,
    );
    const oldVersion = f.agent(2).agentVersion;

    // Not staged yet: upgrade-hosts says what to run first and changes nothing.
    const early = await keelson(["upgrade-hosts", "--config", config, "--hosts", `${a},${b}`], { env });
    expect(early.code).toBe(1);
    expect(early.stderr).toContain(`run keelson configure-hosts --config ${config} first`);

    // A host the file does not list, and a field it does not know, are usage errors.
    const unlisted = await keelson(["upgrade-hosts", "--config", config, "--hosts", `${a},nobody`], { env });
    expect(unlisted.code).toBe(2);
    expect(unlisted.stderr).toContain(`--hosts: nobody is not listed in ${config}`);
    const docker = join(dir, "docker.yaml");
    writeFileSync(docker, `hostAgentRepo: keelson-agent-7.1.0.tar.gz\ndockerRepo: no-such-images.tar\nhosts: [${a}]\n`);
    const refused = await keelson(["configure-hosts", "--config", docker], { env });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`dockerRepo ${join(dir, "no-such-images.tar")}: ENOENT`);
    expect(f.agent(0).stagedImages.size).toBe(0);

    const configured = await keelson(["configure-hosts", "--config", config], { env });
    expect(configured.code, configured.stderr).toBe(0);
    expect(configured.stdout).toContain("agent package 7.1.0 stored on the control plane");
    expect(configured.stdout).toContain(`ready: keelson upgrade-hosts --config ${config} --hosts ${a},${b},${c}`);

    const upgraded = await keelson(["upgrade-hosts", "--config", config, "--hosts", `${a},${b}`], { env });
    expect(upgraded.code, upgraded.stderr).toBe(0);
    expect(upgraded.stderr).toContain(`upgrade-hosts: agents of ${a}, ${b} to 7.1.0, 1 at a time`);
    expect(upgraded.stderr).toContain(`batch 1: ${a}`);
    expect(upgraded.stderr).toContain(`batch 2: ${b}`);
    expect(upgraded.stdout).toMatch(/succeeded: hosts\.upgrade/);
    // Progress per batch and host, from the agents' own status events.
    expect(upgraded.stderr).toContain(`batch 1/2 (hosts)  ${a} (host): done, running 7.1.0`);
    expect(upgraded.stderr).toContain(`batch 2/2 (hosts)  ${b} (host): done, running 7.1.0`);

    const after = await statuses();
    const version = (name: string) => after.find((h) => h.name === name)?.hostAgentVersion;
    expect([version(a), version(b), version(c)]).toEqual(["7.1.0", "7.1.0", oldVersion]);
    expect(f.agent(2).agentVersion).toBe(oldVersion);

    // Again: nothing left to do for those two.
    const again = await keelson(["upgrade-hosts", "--config", config, "--hosts", `${a},${b}`], { env });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("every listed host runs agent 7.1.0 already");

    // The operation, read by its whole uuid.
    const list = await keelson(["operations", "list", "-o", "json"], { env });
    const op = (JSON.parse(list.stdout) as { uuid: string; kind: string }[]).find((o) => o.kind === "hosts.upgrade");
    const got = await keelson(["operations", "get", op?.uuid as string, "-o", "json"], { env });
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({ uuid: op?.uuid, kind: "hosts.upgrade", state: "succeeded" });
    const unknown = await keelson(["operations", "get", "00000000-0000-4000-8000-000000000000"], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no operation "00000000-0000-4000-8000-000000000000" in this project');
  });

  it("configure-hosts stages the dockerRepo's archives (a directory of them) on the listed hosts only", async () => {
    const [a, b] = names as [string, string, string];
    const images = join(dir, "images-7.1.0");
    mkdirSync(images);
    writeOciArchive(join(dir, "oci-a"), join(images, "pause.tar"), "example.com/keelson/pause:3.10");
    writeOciArchive(join(dir, "oci-b"), join(images, "coredns.tar"), "example.com/keelson/coredns:1.11");
    const config = join(dir, "with-images.yaml");
    writeFileSync(
      config,
      `hostAgentRepo: keelson-agent-7.1.0.tar.gz\ndockerRepo: images-7.1.0\nhosts: [${a}, ${b}, ${names[2]}]\n`,
    );
    const res = await keelson(["configure-hosts", "--config", config, "--hosts", `${a},${b}`], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain("configure-hosts: agent package 7.1.0 and 2 image archive(s)");
    expect(res.stderr).toContain(
      "image archive coredns stored on the control plane (example.com/keelson/coredns:1.11)",
    );
    // Hosts in no cluster run no runtime: staged now, imported when their node starts one.
    expect(res.stdout).toContain(`${a}: coredns staged (no runtime runs there`);
    expect(res.stdout).toContain(`${b}: pause staged (no runtime runs there`);
    expect([...f.agent(0).stagedImages.keys()].sort()).toEqual(["coredns", "pause"]);
    expect([...f.agent(1).stagedImages.keys()].sort()).toEqual(["coredns", "pause"]);
    expect(f.agent(2).stagedImages.size).toBe(0);
  });

  it("--version prints the CLI's version", async () => {
    const res = await keelson(["--version"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe("0.1.0\n");
  });
});
