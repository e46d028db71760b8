// `pnpm bench aws`: the round trip of Keelson's AWS calls against the AWS stand-in on loopback
// (test/aws-standin), through a real keelson-server started with AWS_ENDPOINT_URL: `validate`
// (STS GetCallerIdentity) and region detail (DescribeRegions, then the region's calls at once),
// beside baselines measured in the same run: the same SDK calls made directly from this process,
// with no HTTP API, database or auth in front, with a new client per call and with kept clients
// (the server keeps them, client-cache.ts). Also counts the SDK calls one region detail makes.
// Requests go one at a time (latency, not throughput). Prints figures; never fails on a time.
import {
  checkAwsCredentials,
  listAwsRegions,
} from "../../../packages/control-plane/src/domain/cloud-providers/aws/account.ts";
import type { AwsAccount } from "../../../packages/control-plane/src/domain/cloud-providers/aws/clients.ts";
import { awsRegionDetail } from "../../../packages/control-plane/src/domain/cloud-providers/aws/region-detail.ts";
import { CloudClientCache } from "../../../packages/control-plane/src/domain/cloud-providers/client-cache.ts";
import { STANDIN_KEYS, startAwsStandin } from "../../aws-standin/server.ts";
import { api, startServer } from "../../e2e/support/processes.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const REGION = "us-west-2";

interface Row {
  label: string;
  p50: number;
  p90: number;
  p99: number;
  calls: number;
}

async function timed(label: string, standinCalls: () => number, run: () => Promise<void>): Promise<Row> {
  for (let i = 0; i < 10; i++) await run(); // warm-up: JIT, connection pools
  const samples: number[] = [];
  const before = standinCalls();
  for (let i = 0; i < ROUNDS; i++) {
    const started = process.hrtime.bigint();
    await run();
    samples.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] as number;
  return { label, p50: at(0.5), p90: at(0.9), p99: at(0.99), calls: (standinCalls() - before) / ROUNDS };
}

function print(rows: Row[]): void {
  const header = ["case", "p50 ms", "p90 ms", "p99 ms", "AWS calls each"];
  const lines = rows.map((r) => [r.label, r.p50.toFixed(2), r.p90.toFixed(2), r.p99.toFixed(2), r.calls.toFixed(0)]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ");
  process.stdout.write(`${fmt(header)}\n${fmt(widths.map((w) => "-".repeat(w)))}\n`);
  for (const l of lines) process.stdout.write(`${fmt(l)}\n`);
}

const standin = await startAwsStandin();
const server = await startServer({ env: { AWS_ENDPOINT_URL: standin.url, KEELSON_LOG_LEVEL: "error" } });
const calls = () => standin.calls.length;
try {
  const admin = server.adminToken;
  const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/cloudProviders`, admin, {
    method: "POST",
    body: { name: "bench", type: "aws", ...STANDIN_KEYS },
  });
  if (created.status !== 200) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  const uuid = created.body.uuid;

  const account: AwsAccount = {
    settings: { awsEndpointUrl: standin.url, cloudCallTimeoutMs: 15_000 },
    credentials: STANDIN_KEYS,
  } as AwsAccount;
  const clients = new CloudClientCache();
  const kept: AwsAccount = { ...account, clients };
  const rows: Row[] = [];
  rows.push(
    await timed("baseline: GetCallerIdentity, SDK direct, a new client per call", calls, async () => {
      await checkAwsCredentials(account);
    }),
  );
  rows.push(
    await timed("baseline: GetCallerIdentity, SDK direct, kept client", calls, async () => {
      await checkAwsCredentials(kept);
    }),
  );
  rows.push(
    await timed("baseline: keelson GET /v4/{p}/cloudProvider/types (no AWS call)", calls, async () => {
      const res = await api(`${server.url}/v4/${projectId}/cloudProvider/types`, admin);
      if (res.status !== 200) throw new Error(`types: ${res.status}`);
    }),
  );
  rows.push(
    await timed("keelson: POST /v4/{p}/cloudProviders/validate", calls, async () => {
      const res = await api(`${server.url}/v4/${projectId}/cloudProviders/validate`, admin, {
        method: "POST",
        body: { name: "check", type: "aws", ...STANDIN_KEYS },
      });
      if (res.status !== 200) throw new Error(`validate: ${res.status}`);
    }),
  );
  rows.push(
    await timed("baseline: region detail's calls, SDK direct, kept clients", calls, async () => {
      await listAwsRegions(kept);
      await awsRegionDetail(kept, REGION);
    }),
  );
  rows.push(
    await timed(`keelson: GET /v4/{p}/cloudProviders/{uuid}/region/${REGION}`, calls, async () => {
      const res = await api(`${server.url}/v4/${projectId}/cloudProviders/${uuid}/region/${REGION}`, admin);
      if (res.status !== 200) throw new Error(`region detail: ${res.status}`);
    }),
  );
  clients.destroy();
  process.stdout.write(`AWS stand-in on loopback, ${ROUNDS} sequential requests per case\n`);
  print(rows);
} finally {
  await server.stop();
  await standin.close();
}
