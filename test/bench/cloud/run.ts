// `pnpm bench cloud`: the cloud half of an AWS auto deploy (domain/cloud-providers/aws/deploy)
// of a 3-master, 50-worker cluster against the AWS stand-in on loopback (test/aws-standin), at
// 0 ms and at BENCH_LATENCY_MS (default 50) per API call: wall time and the number of calls,
// beside the baselines from the same run: the calls that create something (the least the plan
// can make from nothing; the rest are the look-ups that make a step safe to re-run) and those
// calls' latency alone if made one after another. A second, resumed run shows what a crash
// costs (look-ups only). Instances boot no agents here (that is the e2e tests' work), so this
// times the cloud calls only. Prints figures; never fails on a time.

import type { AwsAccount } from "../../../packages/control-plane/src/domain/cloud-providers/aws/clients.ts";
import {
  type AwsDeploySpec,
  deployAll,
} from "../../../packages/control-plane/src/domain/cloud-providers/aws/deploy/create.ts";
import type { DeployTarget } from "../../../packages/control-plane/src/domain/cloud-providers/aws/deploy/target.ts";
import { CloudClientCache } from "../../../packages/control-plane/src/domain/cloud-providers/client-cache.ts";
import { STANDIN_KEYS, startAwsStandin } from "../../aws-standin/server.ts";

const LATENCY = Number(process.env.BENCH_LATENCY_MS ?? 50);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 50);

const spec: AwsDeploySpec = {
  azs: ["us-west-2a", "us-west-2b", "us-west-2c"],
  numMasters: 3,
  numWorkers: WORKERS,
  enableCAS: false,
  numMinWorkers: 0,
  numMaxWorkers: 0,
  internalElb: false,
  k8sApiPort: 6443,
  imageId: "ami-0usw200000000000a2",
  masterFlavor: "m5.large",
  workerFlavor: "m5.large",
  masterUserData: "#!/bin/sh\n",
  workerUserData: "#!/bin/sh\n",
  dns: { hostedZoneId: "Z0STANDIN00PUBLIC", name: "api.bench.example.com" },
};

const rows: string[][] = [
  ["latency/call", "run", "wall ms", "calls", "create calls (baseline)", "baseline ms (creating calls x latency)"],
];
for (const latencyMs of [0, LATENCY]) {
  const standin = await startAwsStandin({ latencyMs });
  const clients = new CloudClientCache();
  const account = {
    settings: { awsEndpointUrl: standin.url, cloudCallTimeoutMs: 30_000 },
    credentials: STANDIN_KEYS,
    clients,
  } as AwsAccount;
  try {
    for (const run of ["first", "resumed"]) {
      const target: DeployTarget = {
        account,
        region: "us-west-2",
        clusterId: "bbbbbbbb-0000-4000-8000-000000000001",
        calls: 0,
      };
      const before = standin.calls.length;
      const started = performance.now();
      await deployAll(target, spec);
      const wall = performance.now() - started;
      const made = standin.calls.slice(before);
      const creating = made.filter((c) => !/^(Describe|List|GET )/.test(c.action)).length;
      rows.push([
        `${latencyMs} ms`,
        run,
        wall.toFixed(0),
        String(made.length),
        String(creating),
        String(creating * latencyMs),
      ]);
    }
    const instances = [...standin.world.instances.values()].filter((i) => i.state === "running").length;
    if (instances !== 3 + WORKERS) throw new Error(`expected ${3 + WORKERS} instances, the stand-in runs ${instances}`);
  } finally {
    clients.destroy();
    await standin.close();
  }
}
process.stdout.write(`AWS auto deploy, 3 masters + ${WORKERS} workers, against the stand-in on loopback\n`);
for (const r of rows) process.stdout.write(`${r.map((c, i) => (i === 0 ? c.padEnd(14) : c.padStart(12))).join(" ")}\n`);
