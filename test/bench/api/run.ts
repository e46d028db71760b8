// `pnpm bench api`: GET /v4/{p}/clusters/{uuid} and the list with 1,000 clusters in one project,
// against a bare Fastify route in the same run. Prints figures; never fails on a time.
import { spawn } from "node:child_process";
import { api, startServer } from "../../e2e/support/processes.ts";
import { load, printTable } from "../support/measure.ts";

const CLUSTERS = Number(process.env.BENCH_CLUSTERS ?? 1000);
const DURATION = Number(process.env.BENCH_DURATION_SEC ?? 10);

const server = await startServer({ env: { KEELSON_LOG_LEVEL: "error", NODE_ENV: "production" } });
const admin = server.adminToken;
try {
  const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin);
  const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  const started = Date.now();
  let uuid = "";
  for (let i = 0; i < CLUSTERS; i++) {
    const res = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: {
        name: `bench-${i}`,
        containersCidr: "10.20.0.0/16",
        servicesCidr: "10.21.0.0/16",
        tags: { i: String(i) },
      },
    });
    if (res.status !== 200) throw new Error(`create ${i}: ${res.status} ${JSON.stringify(res.body)}`);
    uuid = res.body.uuid;
  }
  const createSec = (Date.now() - started) / 1000;
  process.stdout.write(
    `created ${CLUSTERS} clusters in ${createSec.toFixed(1)} s (${(CLUSTERS / createSec).toFixed(0)}/s)\n`,
  );

  const one = await api(`${server.url}/v4/${projectId}/clusters/${uuid}`, admin);
  const bare = spawn(process.execPath, ["--import", "tsx", new URL("./bare-server.ts", import.meta.url).pathname], {
    env: { ...process.env, BARE_PAYLOAD: JSON.stringify(one.body) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const bareUrl = await new Promise<string>((resolve) => {
    bare.stdout?.once("data", (d) => resolve(String(d).trim()));
  });
  try {
    const headers = { "x-auth-token": admin };
    const rows = [
      await load("bare fastify route (same payload)", `${bareUrl}/bare`, { durationSec: DURATION }),
      await load("GET /v4/{p}/clusters/{uuid}", `${server.url}/v4/${projectId}/clusters/${uuid}`, {
        headers,
        durationSec: DURATION,
      }),
      await load(`GET /v4/{p}/clusters (${CLUSTERS} records)`, `${server.url}/v4/${projectId}/clusters`, {
        headers,
        durationSec: DURATION,
        connections: 4,
      }),
    ];
    printTable(rows);
    const [baseline, single] = rows as [(typeof rows)[0], (typeof rows)[0]];
    const ratio = single.requestsPerSec / baseline.requestsPerSec;
    process.stdout.write(
      `single-cluster read at ${(ratio * 100).toFixed(0)}% of the bare route (target >= 40%), p99 ${single.p99.toFixed(1)} ms (target < 20 ms)\n`,
    );
  } finally {
    bare.kill("SIGTERM");
  }
} finally {
  await server.stop();
}
