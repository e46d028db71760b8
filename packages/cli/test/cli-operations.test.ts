import { execFileSync, spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { Fleet } from "../../control-plane/test/membership-harness.ts";
import { type FleetAllocator, readyCluster } from "../../control-plane/test/rollout-harness.ts";
import { useCliFleet } from "./cli-fleet.ts";
import { type CliResult, keelson } from "./run-cli.ts";

/**
 * Operations through the real `keelson` binary: attach and detach followed to the end, a
 * failed operation (a simulated host that fails a phase) exiting 1 and naming the failure,
 * `operations list|get|watch`, the hosts and nodes views, and the live display on a terminal
 * (a pseudo-terminal made by script(1)).
 */

const FAILING = "clo-00012";
const ESC = String.fromCharCode(27);
/** Cursor up N lines, then clear to the end: the display redrawn in place. */
const REDRAW = new RegExp(`${ESC}\\[\\d+A${ESC}\\[0J`);
const COLOUR = new RegExp(`${ESC}\\[\\d+m`);
// Every test runs the CLI as a process several times (a second or more each on a busy machine).
vi.setConfig({ testTimeout: 180_000 });

let f: Fleet;
let pool: FleetAllocator;
let env: Record<string, string>;

useCliFleet(
  12,
  { namePrefix: "clo", phaseTimeMs: 300, failPhase: (hostname) => (hostname === FAILING ? "kubelet" : undefined) },
  (fleet) => {
    ({ f, pool, env } = fleet);
  },
);

/** Runs keelson on a pseudo-terminal: stdout and stderr are the terminal, as for a person. */
function onTerminal(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  const bin = join(import.meta.dirname, "..", "bin", "keelson.mjs");
  const command = [process.execPath, bin, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qefc", command, "/dev/null"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TERM: "xterm", ...env, ...extraEnv },
    });
    let stdout = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr: "" }));
    child.stdin.end();
  });
}

describe("operations", () => {
  it("attach and detach follow their operation; hosts, nodes and operations show the result", async () => {
    const [master, worker] = pool.take(2);
    const created = await keelson(["clusters", "create", "-f", "-"], {
      env,
      input: "{name: clo-attach, masterVipIpv4: 10.0.1.10, masterVipIface: eth0}",
    });
    expect(created.code, created.stderr).toBe(0);
    const attach = await keelson(
      ["attach", "clo-attach", "--master", master?.hostname as string, "--worker", worker?.hostId as string],
      { env },
    );
    expect(attach.code, attach.stderr).toBe(0);
    expect(attach.stdout).toMatch(/succeeded: cluster\.attach/);
    expect(attach.stderr).toMatch(new RegExp(`${master?.hostname} \\(master\\): done`));

    const nodes = await keelson(["nodes", "list", "--cluster", "clo-attach"], { env });
    expect(nodes.code, nodes.stderr).toBe(0);
    expect(nodes.stdout).toMatch(
      new RegExp(`${master?.hostname}\\s+${master?.hostId}\\s+\\S+\\s+master\\s+clo-attach\\s+ok`),
    );
    expect(nodes.stdout).toMatch(
      new RegExp(`${worker?.hostname}\\s+${worker?.hostId}\\s+\\S+\\s+worker\\s+clo-attach\\s+ok`),
    );

    const host = await keelson(["hosts", "get", master?.hostname as string, "-o", "json"], { env });
    expect(host.code, host.stderr).toBe(0);
    expect(JSON.parse(host.stdout)).toMatchObject({ id: master?.hostId, info: { responding: true } });
    const hosts = await keelson(["hosts", "list"], { env });
    expect(hosts.stdout.split("\n")[0]).toMatch(/^NAME\s+ID\s+IP\s+ARCH\s+RESPONDING/);
    expect(hosts.stdout).toContain(worker?.hostId as string);

    const detach = await keelson(["detach", "clo-attach", worker?.hostname as string], { env });
    expect(detach.code, detach.stderr).toBe(0);
    expect(detach.stdout).toMatch(/succeeded: cluster\.detach/);
    expect((await f.node(worker?.hostId as string)).clusterUuid).toBeNull();

    const ops = await keelson(["operations", "list", "--cluster", "clo-attach", "-o", "json"], { env });
    const kinds = (JSON.parse(ops.stdout) as { kind: string; state: string }[]).map((o) => `${o.kind} ${o.state}`);
    expect(kinds).toEqual(["cluster.detach succeeded", "cluster.attach succeeded", "cluster.create succeeded"]);
  });

  it("a failed operation exits 1 naming the failure; operations get and watch show it", async () => {
    const [master] = pool.take(1);
    await readyCluster(f, "clo-fail", [master as never], []);
    const failing = f.sim.agents.find((a) => a.hostname === FAILING);
    const attach = await keelson(["attach", "clo-fail", "--worker", FAILING], { env });
    expect(attach.code).toBe(1);
    expect(attach.stderr).toMatch(/error: cluster\.attach [0-9a-f-]{36} failed in .*: .+/);
    expect(attach.stderr).toMatch(
      new RegExp(`${FAILING} \\(worker\\): failed, phase 12 Configure and start kubelet failed`),
    );
    const id = /cluster\.attach ([0-9a-f-]{36}) failed/.exec(attach.stderr)?.[1] as string;
    // The failure is the host that failed its kubelet phase, as the control plane records it.
    expect(await f.node(failing?.hostId as string)).toMatchObject({ name: FAILING, status: "failed" });

    const get = await keelson(["operations", "get", id.slice(0, 8)], { env });
    expect(get.code, get.stderr).toBe(0);
    expect(get.stdout).toMatch(new RegExp(`${id}\\s+cluster\\.attach\\s+\\S+\\s+failed`));
    const watch = await keelson(["operations", "watch", id], { env });
    expect(watch.code).toBe(1);
    expect(watch.stderr).toContain(`cluster.attach ${id} failed`);
    const unknown = await keelson(["operations", "get", "ffffffff"], { env });
    expect(unknown.code).toBe(1);
  });

  it("on a terminal the progress is redrawn in place, in colour unless NO_COLOR", async () => {
    const [master] = pool.take(1);
    await readyCluster(f, "clo-tty", [master as never], []);
    const coloured = await onTerminal(["restart", "clo-tty"]);
    expect(coloured.code, coloured.stdout).toBe(0);
    expect(coloured.stdout).toMatch(REDRAW);
    expect(coloured.stdout).toContain("\x1b[32msucceeded\x1b[0m");
    expect(coloured.stdout).toContain(`batch 1/1 (master)`);

    const plain = await onTerminal(["restart", "clo-tty"], { NO_COLOR: "1" });
    expect(plain.code, plain.stdout).toBe(0);
    expect(plain.stdout).toMatch(REDRAW);
    expect(plain.stdout).not.toMatch(COLOUR);
    expect(plain.stdout).toContain("succeeded: cluster.restart");
  });
});

describe("Ctrl-C", () => {
  it("stops watching, not the operation, and says so", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(3);
    await readyCluster(f, "clo-int", [master as never], workers);
    const bin = join(import.meta.dirname, "..", "bin", "keelson.mjs");
    // Four batches one after another: the restart outlasts the moment the CLI is interrupted.
    const child = spawn(process.execPath, [bin, "restart", "clo-int", "--batch-percent", "1"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    });
    let stderr = "";
    let stdout = "";
    let interrupted = false;
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
      // One Ctrl-C (a second one ends the process the default way, as a person expects).
      if (!interrupted && stderr.includes("following ")) {
        interrupted = true;
        child.kill("SIGINT");
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, stderr).toBe(130);
    const id = /following cluster\.restart ([0-9a-f-]{36})/.exec(stderr)?.[1] as string;
    expect(stderr).toContain(`stopped watching; operation ${id} goes on on the server`);
    expect(stdout).not.toContain("succeeded");
    // The operation was not stopped: it runs to its end on the server.
    await f.idle();
    const ops = await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/operations?limit=1000` });
    expect((ops.json() as { uuid: string; state: string }[]).find((o) => o.uuid === id)?.state).toBe("succeeded");
    expect(workers.map((a) => a.restarts)).toEqual([1, 1, 1]);
  });
});

describe("upgrade", () => {
  it("upgrades to the patch target, the chosen workers first, and follows it to the end", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(2);
    await readyCluster(f, "clo-up", [master as never], workers, { kubeRoleVersion: "1.30.6-kls.1" });
    const wrongType = await keelson(["upgrade", "clo-up", "--type", "major"], { env });
    expect(wrongType.code).toBe(2);
    // A request timeout shorter than the rollout: it must not cut the events stream off.
    const res = await keelson(["upgrade", "clo-up", "--type", "patch", "--nodes", workers[1]?.hostname as string], {
      env: { ...env, KEELSON_REQUEST_TIMEOUT_MS: "700" },
    });
    expect(res.code, res.stderr).toBe(0);
    const took = Number(/succeeded: cluster\.upgrade \S+ in ([\d.]+)s/.exec(res.stdout)?.[1]);
    expect(took).toBeGreaterThan(0.7);
    // Master, then the chosen worker on its own, then the other worker.
    expect(res.stderr).toMatch(
      new RegExp(`batch 2/3 \\(chosen workers\\)  ${workers[1]?.hostname} \\(worker\\): rolling`),
    );
    expect(res.stderr).toMatch(new RegExp(`batch 3/3 \\(workers\\)  ${workers[0]?.hostname} \\(worker\\): rolling`));
    const after = JSON.parse((await keelson(["clusters", "get", "clo-up", "-o", "json"], { env })).stdout);
    expect(after.kubeRoleVersion).not.toBe("1.30.6-kls.1");
    expect(after.kubeRoleVersion).toMatch(/^1\.30\./);
  });
});

describe("join tokens", () => {
  it("join-token create prints the token alone (for scripts), or the whole answer with -o json", async () => {
    const plain = await keelson(["join-token", "create"], { env });
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout.trim()).toMatch(/^\S{20,}$/);
    // The line to paste on a new host goes to stderr, beside the token on stdout.
    expect(plain.stderr).toContain(`KEELSON_JOIN_TOKEN='${plain.stdout.trim()}' sh`);
    const json = await keelson(["join-token", "create", "--expires-in-minutes", "5", "-o", "json"], { env });
    const issued = JSON.parse(json.stdout) as { token: string; expiresAt: string; projectId: string };
    expect(issued.projectId).toBe(f.t.projectId);
    expect(Date.parse(issued.expiresAt) - Date.now()).toBeLessThanOrEqual(5 * 60_000);
    expect(issued.token).not.toBe(plain.stdout.trim());
  });
});

describe("completion", () => {
  it("prints bash and zsh scripts made from the command tree", async () => {
    const bash = await keelson(["completion", "bash"], { env });
    expect(bash.code).toBe(0);
    expect(bash.stdout).toContain('"clusters") words="list get create update delete');
    // The script is valid bash.
    execFileSync("bash", ["-n"], { input: bash.stdout });
    const zsh = await keelson(["completion", "zsh"], { env });
    expect(zsh.stdout).toContain("compdef _keelson keelson");
    expect((await keelson(["completion", "fish"], { env })).code).toBe(2);
  });

  it("--help on every command, with examples, exits 0", async () => {
    const help = await keelson(["clusters", "create", "--help"], { env });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: keelson clusters create [options]");
    expect(help.stdout).toContain("$ keelson clusters create -f demo.yaml");
    const top = await keelson(["--help"], { env });
    expect(top.stdout).toMatch(/Exit codes: 0 ok, 1 failed operation or refused request, 2 usage, 3 unreachable/);
  });
});
