// `pnpm bench api`: GET /v4/{p}/clusters/{uuid}, the list of 1,000 clusters in one project and
// cluster create, on SQLite and on PostgreSQL in the same run, against a bare Fastify route
// (the baseline). Prints figures; never fails on a time.
import { spawn } from "node:child_process";
import { api, startServer } from "../../e2e/support/processes.ts";
import { startPostgres } from "../../support/postgres.ts";
import { type LoadResult, load, printTable } from "../support/measure.ts";

const CLUSTERS = Number(process.env.BENCH_CLUSTERS ?? 1000);
const DURATION = Number(process.env.BENCH_DURATION_SEC ?? 10);

interface Figures {
  createPerSec: number;
  single: LoadResult;
  list: LoadResult;
  payload: unknown;
}

/** One keelson-server on the given store: creates the clusters, then loads the two reads. */
async function measure(dialect: string, env: Record<string, string>): Promise<Figures> {
  const server = await startServer({ env: { KEELSON_LOG_LEVEL: "error", NODE_ENV: "production", ...env } });
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
    const createPerSec = CLUSTERS / ((Date.now() - started) / 1000);
    const headers = { "x-auth-token": admin };
    const single = await load(
      `${dialect}: GET /v4/{p}/clusters/{uuid}`,
      `${server.url}/v4/${projectId}/clusters/${uuid}`,
      {
        headers,
        durationSec: DURATION,
      },
    );
    const list = await load(
      `${dialect}: GET /v4/{p}/clusters (${CLUSTERS})`,
      `${server.url}/v4/${projectId}/clusters`,
      {
        headers,
        durationSec: DURATION,
        connections: 4,
      },
    );
    const payload = (await api(`${server.url}/v4/${projectId}/clusters/${uuid}`, admin)).body;
    return { createPerSec, single, list, payload };
  } finally {
    await server.stop();
  }
}

const pg = await startPostgres();
try {
  const sqlite = await measure("sqlite", {});
  const postgres = await measure("postgres", { KEELSON_DATABASE_URL: await pg.createDatabase() });

  const bare = spawn(process.execPath, ["--import", "tsx", new URL("./bare-server.ts", import.meta.url).pathname], {
    env: { ...process.env, BARE_PAYLOAD: JSON.stringify(sqlite.payload) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const bareUrl = await new Promise<string>((resolve) => {
    bare.stdout?.once("data", (d) => resolve(String(d).trim()));
  });
  let baseline: LoadResult;
  try {
    baseline = await load("bare fastify route (same payload)", `${bareUrl}/bare`, { durationSec: DURATION });
  } finally {
    bare.kill("SIGTERM");
  }
  printTable([baseline, sqlite.single, postgres.single, sqlite.list, postgres.list]);
  const ratio = (a: LoadResult, b: LoadResult) => (a.requestsPerSec / b.requestsPerSec).toFixed(2);
  process.stdout.write(
    [
      `cluster create: sqlite ${sqlite.createPerSec.toFixed(0)}/s, postgres ${postgres.createPerSec.toFixed(0)}/s`,
      `single read: sqlite at ${((sqlite.single.requestsPerSec / baseline.requestsPerSec) * 100).toFixed(0)}% of the bare route, postgres at ${((postgres.single.requestsPerSec / baseline.requestsPerSec) * 100).toFixed(0)}% (targets: >= 40%; postgres within 1.5x of sqlite: sqlite/postgres = ${ratio(sqlite.single, postgres.single)})`,
      `list of ${CLUSTERS}: sqlite/postgres = ${ratio(sqlite.list, postgres.list)} (target <= 1.5)`,
      "",
    ].join("\n"),
  );
} finally {
  await pg.stop();
}
