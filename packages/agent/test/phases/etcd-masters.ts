import { rmSync } from "node:fs";
import { join } from "node:path";
import type { NodeConfig } from "../../src/phases/config.ts";
import { createKubeApi } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { PhaseContext, PhaseIntent, SignCsr } from "../../src/phases/types.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { createTestCa, freePorts, nodeConfig, phaseContexts, tempDir, testLog } from "./helpers.ts";

/**
 * Masters on loopback addresses whose etcd phases run for real (tests of etcd joins and of
 * etcd health): one CA for all of them, each with its own host root, fast etcd timings, and
 * a phase context per intent. `close()` stops what their phases started.
 */
export interface EtcdTestMaster {
  config: NodeConfig;
  services: DirectSupervisor;
  ctx: (intent: PhaseIntent) => PhaseContext;
}

export class EtcdTestMasters {
  readonly masters: EtcdTestMaster[] = [];
  private root = "";
  private signCsr: SignCsr | undefined;

  async setUp(name: string): Promise<void> {
    this.root = tempDir(name);
    this.signCsr = (await createTestCa(join(this.root, "ca"))).signCsr;
  }

  async add(ip: string, etcdPeers: string[]): Promise<EtcdTestMaster> {
    const signCsr = this.signCsr;
    if (!signCsr) throw new Error("EtcdTestMasters.setUp first");
    const config = nodeConfig({
      hostRoot: join(this.root, ip),
      primaryIp: ip,
      ports: await freePorts(ip),
      etcdPeers,
      cluster: { etcdHeartbeatIntervalMs: 50, etcdElectionTimeoutMs: 500 },
    });
    const services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
    const kubeApi = createKubeApi({
      url: config.apiServerUrl,
      caFile: nodePaths(config.hostRoot).caCert,
      certFile: "",
      keyFile: "",
    });
    const master: EtcdTestMaster = {
      config,
      services,
      ctx: phaseContexts({ config, services, signCsr, kubeApi, timeoutMs: 30_000 }),
    };
    this.masters.push(master);
    return master;
  }

  close(): void {
    for (const m of this.masters) {
      m.services.close();
      killAllFromPidFiles(m.config.hostRoot);
    }
    if (this.root && !process.env.KEEP) rmSync(this.root, { recursive: true, force: true });
  }
}
