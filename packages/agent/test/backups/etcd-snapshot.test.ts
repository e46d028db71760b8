import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listBackups } from "../../src/backups/files.ts";
import { type BackupReport, EtcdBackups } from "../../src/backups/index.ts";
import type { NodeConfig } from "../../src/phases/config.ts";
import { genCerts } from "../../src/phases/impl/certs.ts";
import { configureEtcd, etcdctl, etcdUrls, startEtcd } from "../../src/phases/impl/etcd.ts";
import { createKubeApi } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { PhaseContext, PhaseIntent } from "../../src/phases/types.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { createTestCa, freePorts, nodeConfig, phaseContexts, tempDir, testLog } from "../phases/helpers.ts";

/**
 * A real etcd member with client TLS on 127.0.0.41, set up by the etcd phases, backed up by
 * the agent's EtcdBackups exactly as on a master: the node package's etcdctl, the node's
 * client URL and etcd-client certificate. The snapshot files are real: `etcdctl snapshot
 * status` reads them, and retention keeps the newest.
 */

const IP = "127.0.0.41";
let root: string;
let config: NodeConfig;
let services: DirectSupervisor;
let ctx: (intent: PhaseIntent) => PhaseContext;

beforeAll(async () => {
  root = tempDir("backup");
  const { signCsr } = await createTestCa(join(root, "ca"));
  config = nodeConfig({
    hostRoot: join(root, "host"),
    primaryIp: IP,
    ports: await freePorts(IP),
    cluster: { etcdHeartbeatIntervalMs: 50, etcdElectionTimeoutMs: 500 },
  });
  services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
  const kubeApi = createKubeApi({
    url: config.apiServerUrl,
    caFile: nodePaths(config.hostRoot).caCert,
    certFile: "",
    keyFile: "",
  });
  ctx = phaseContexts({ config, services, signCsr, kubeApi, timeoutMs: 30_000 });
  for (const phase of [genCerts, configureEtcd, startEtcd]) await phase.start(ctx("start"));
  await etcdctl(ctx("status"), [etcdUrls(ctx("status")).client], ["put", "/keelson/backed-up", "yes"]);
}, 60_000);

afterAll(() => {
  services?.close();
  if (config) killAllFromPidFiles(config.hostRoot);
  if (root && !process.env.KEEP) rmSync(root, { recursive: true, force: true });
});

function withBackups(settings: Record<string, unknown>): NodeConfig {
  return { ...config, cluster: { ...config.cluster, ...settings } as NodeConfig["cluster"] };
}

async function until<T>(what: string, check: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("etcd backups on a real master", () => {
  it("writes real snapshots on the interval, prunes to the count and reports each run", async () => {
    const reports: BackupReport[] = [];
    // A 400 ms "minute": intervalInMins 1 runs every 400 ms.
    const backups = new EtcdBackups({ log: testLog(), send: (r) => reports.push(r) > 0, minuteMs: 400 });
    try {
      backups.apply(
        withBackups({
          isEtcdBackupEnabled: true,
          intervalInMins: 1,
          maxIntervalBackupCount: 2,
          storageType: "local",
          localPath: "/srv/etcd-backups",
        }),
      );
      await until("three good backups", () => (reports.filter((r) => r.ok).length >= 3 ? true : undefined));
    } finally {
      await backups.close();
    }
    const dir = join(config.hostRoot, "srv", "etcd-backups");
    expect(reports.every((r) => r.ok && r.clusterId === "c1")).toBe(true);
    // Interval names have one-second resolution: runs 400 ms apart may share a name, so only
    // the count is certain. Retention keeps at most two, and no partial file stays behind.
    const kept = listBackups(dir, "interval");
    expect(kept.length).toBeGreaterThanOrEqual(1);
    expect(kept.length).toBeLessThanOrEqual(2);
    expect(readdirSync(dir).sort()).toEqual(kept);
    const file = join(dir, kept.at(-1) as string);
    expect(reports.at(-1)?.file).toBe(file);
    const status = await execa("etcdctl", ["snapshot", "status", file, "-w", "json"], { env: { ETCDCTL_API: "3" } });
    const parsed = JSON.parse(status.stdout) as { hash: number; revision: number; totalKey: number };
    expect(parsed.revision).toBeGreaterThanOrEqual(2);
    expect(parsed.totalKey).toBeGreaterThanOrEqual(1);
  }, 40_000);

  it("reports an error run when etcd does not answer, and one at once when the path cannot be made", async () => {
    const reports: BackupReport[] = [];
    const backups = new EtcdBackups({
      log: testLog(),
      send: (r) => reports.push(r) > 0,
      minuteMs: 100,
      snapshotTimeoutMs: 3_000,
    });
    try {
      // A port where nothing listens: the run fails and says so.
      backups.apply({
        ...withBackups({ isEtcdBackupEnabled: true, intervalInMins: 1, maxIntervalBackupCount: 1 }),
        ports: { ...config.ports, etcdClient: 1 },
      });
      const failed = await until("a failed run", () => reports.find((r) => !r.ok));
      expect(failed.error).toMatch(/etcdctl snapshot save failed/);
      expect(listBackups(join(config.hostRoot, "var/lib/keelson/etcd-backups"), "interval")).toEqual([]);

      reports.length = 0;
      backups.apply(
        withBackups({
          isEtcdBackupEnabled: true,
          dailyBackupTime: "03:00",
          maxTimestampBackupCount: 1,
          localPath: "/etc/etcd/etcd.env/backups",
        }),
      );
      expect(reports).toEqual([
        expect.objectContaining({ ok: false, clusterId: "c1", error: expect.stringMatching(/cannot create/) }),
      ]);
    } finally {
      await backups.close();
    }
  }, 30_000);
});
