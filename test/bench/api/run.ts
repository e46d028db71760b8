// `pnpm bench api`: GET /v4/{p}/clusters/{uuid}, the list of 1,000 clusters in one project and
// cluster create, on SQLite and on PostgreSQL in the same run, against a bare Fastify route
// (the baseline); every read over plain HTTP and over HTTPS (KEELSON_TLS=auto: the same server
// restarted on the same data, and the bare route with the same certificate) side by side, in
// turns (BENCH_ROUNDS, default 2) so a drifting machine load falls on both alike.
// Then, over plain HTTP, the list as issue 18 measures it: 16 connections, plain, gzip, brotli
// (encoded once and cached) and 304 (If-None-Match with the list's ETag), beside a bare Fastify
// route sending the same list bytes pre-serialised; and a single read after writes against warm
// (cold-read.ts). Prints figures; never fails on a time.
//
// The load generator (autocannon) does not verify the server certificate (it hard-codes
// rejectUnauthorized: false); its connections are kept alive, so a handshake, and the client's
// verification it skips, happens once per connection and the rows measure TLS per request.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api, startServer, trustedFetch } from "../../e2e/support/processes.ts";
import { startPostgres } from "../../support/postgres.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";
import { type LoadResult, load, printTable } from "../support/measure.ts";
import { type ColdWarm, coldWarm } from "./cold-read.ts";

const CLUSTERS = Number(process.env.BENCH_CLUSTERS ?? 1000);
const DURATION = Number(process.env.BENCH_DURATION_SEC ?? 10);
/** HTTP and HTTPS alternate this many times per store: on a shared machine the load drifts in minutes. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** Issue 18's list load: 16 connections. */
const LIST_CONNECTIONS = 16;
const COLD_ROUNDS = Number(process.env.BENCH_COLD_ROUNDS ?? 300);

/** The two reads of one server, over one scheme. */
interface Reads {
  single: LoadResult;
  list: LoadResult;
}

/** The list of CLUSTERS over plain HTTP with LIST_CONNECTIONS, as each client asks for it. */
interface ListLoads {
  plain: LoadResult;
  gzip: LoadResult;
  br: LoadResult;
  notModified: LoadResult;
  bytes: { plain: number; gzip: number; br: number };
}

interface Figures {
  createPerSec: number;
  lists: ListLoads;
  coldWarm: ColdWarm;
  /** The list's plain bytes, for the bare route. */
  listBody: string;
  http: Reads;
  https: Reads;
  payload: unknown;
  /** The data dir of the server: its tls/ holds the certificate the bare HTTPS route serves too. */
  dataDir: string;
}

async function reads(label: string, url: string, projectId: string, uuid: string, admin: string): Promise<Reads> {
  const headers = { "x-auth-token": admin };
  const single = await load(`${label}: GET /v4/{p}/clusters/{uuid}`, `${url}/v4/${projectId}/clusters/${uuid}`, {
    headers,
    durationSec: DURATION,
  });
  const list = await load(`${label}: GET /v4/{p}/clusters (${CLUSTERS})`, `${url}/v4/${projectId}/clusters`, {
    headers,
    durationSec: DURATION,
    connections: LIST_CONNECTIONS,
  });
  return { single, list };
}

/**
 * One keelson-server on the given store: creates the clusters, then the server runs on that data
 * over plain HTTP and with KEELSON_TLS=auto in turn, ROUNDS times, and the two reads are loaded.
 */
async function measure(dialect: string, env: Record<string, string>): Promise<Figures> {
  const base = { KEELSON_LOG_LEVEL: "error", NODE_ENV: "production", ...env };
  const plain = await startServer({ env: { ...base, KEELSON_TLS: "off" } });
  const admin = plain.adminToken;
  const { dataDir } = plain;
  let projectId: string;
  let uuid = "";
  const uuids: string[] = [];
  let createPerSec: number;
  try {
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${plain.url}/v1/projects`, admin);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const started = Date.now();
    for (let i = 0; i < CLUSTERS; i++) {
      const res = await api<{ uuid: string }>(`${plain.url}/v4/${projectId}/clusters`, admin, {
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
      uuids.push(uuid);
    }
    createPerSec = CLUSTERS / ((Date.now() - started) / 1000);
  } finally {
    await plain.stop();
  }

  const rounds: { http: Reads; https: Reads }[] = [];
  let payload: unknown;
  const { lists, cold, listBody } = await withServer(false, async (url) => {
    const listUrl = `${url}/v4/${projectId}/clusters`;
    const sized = async (encoding?: string) => {
      const res = await fetch(listUrl, {
        headers: { "x-auth-token": admin, ...(encoding ? { "accept-encoding": encoding } : {}) },
      });
      const body = Buffer.from(await res.arrayBuffer());
      return { res, body };
    };
    // Node's fetch decodes what it receives; the sizes are taken from content-length.
    const plain = await sized();
    const size = async (encoding: string) => Number((await sized(encoding)).res.headers.get("content-length"));
    const bytes = { plain: plain.body.length, gzip: await size("gzip"), br: await size("br") };
    const etag = plain.res.headers.get("etag") as string;
    const listLoad = (name: string, extra: Record<string, string>) =>
      load(`${dialect} http: list ${name} (${LIST_CONNECTIONS} conns)`, listUrl, {
        headers: { "x-auth-token": admin, ...extra },
        durationSec: DURATION,
        connections: LIST_CONNECTIONS,
      });
    const loads = {
      plain: await listLoad("plain", {}),
      gzip: await listLoad("gzip", { "accept-encoding": "gzip" }),
      br: await listLoad("br", { "accept-encoding": "gzip, deflate, br" }),
      notModified: await listLoad("304 If-None-Match", { "if-none-match": etag }),
      bytes,
    };
    const cw = await coldWarm(listUrl, admin, uuid, uuids.slice(0, -1), COLD_ROUNDS);
    return { lists: loads, cold: cw, listBody: plain.body.toString() };
  });
  for (let round = 0; round < ROUNDS; round++) {
    const http = await withServer(false, async (url) => reads(`${dialect} http`, url, projectId, uuid, admin));
    const https = await withServer(true, async (url) => {
      // The payload the bare route answers, read through the pinned CA: the HTTPS server serves the same data.
      payload = (await api(`${url}/v4/${projectId}/clusters/${uuid}`, admin, { fetch: trustedFetch(dataDir) })).body;
      return reads(`${dialect} https`, url, projectId, uuid, admin);
    });
    rounds.push({ http, https });
  }
  return {
    createPerSec,
    lists,
    coldWarm: cold,
    listBody,
    http: { single: mean(rounds.map((r) => r.http.single)), list: mean(rounds.map((r) => r.http.list)) },
    https: { single: mean(rounds.map((r) => r.https.single)), list: mean(rounds.map((r) => r.https.list)) },
    payload,
    dataDir,
  };

  /** The server on this store's data, plain or with KEELSON_TLS=auto, for the length of `run`. */
  async function withServer<T>(tls: boolean, run: (url: string) => Promise<T>): Promise<T> {
    const server = await startServer({
      dataDir,
      adminToken: admin,
      https: tls,
      env: { ...base, KEELSON_TLS: tls ? "auto" : "off" },
    });
    try {
      return await run(server.url);
    } finally {
      await server.stop();
    }
  }
}

/** The rounds of one case as one row: throughput and latencies averaged, errors added up. */
function mean(results: LoadResult[]): LoadResult {
  const avg = (pick: (r: LoadResult) => number) => results.reduce((n, r) => n + pick(r), 0) / results.length;
  const sum = (pick: (r: LoadResult) => number) => results.reduce((n, r) => n + pick(r), 0);
  return {
    label: (results[0] as LoadResult).label,
    requestsPerSec: avg((r) => r.requestsPerSec),
    p50: avg((r) => r.p50),
    p99: avg((r) => r.p99),
    errors: sum((r) => r.errors),
    non2xx: sum((r) => r.non2xx),
  };
}

/** The bare Fastify route with the cluster payload, over HTTP or over HTTPS with `tlsDir`'s certificate. */
async function bareRoute(
  label: string,
  payload: unknown,
  tlsDir?: string,
  list?: { file: string; headers?: Record<string, string> },
): Promise<LoadResult> {
  const bare = spawn(process.execPath, ["--import", "tsx", new URL("./bare-server.ts", import.meta.url).pathname], {
    env: {
      ...process.env,
      BARE_PAYLOAD: JSON.stringify(payload),
      ...(tlsDir ? { BARE_TLS_DIR: tlsDir } : {}),
      ...(list ? { BARE_LIST_FILE: list.file } : {}),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      bare.stdout?.once("data", (d) => resolve(String(d).trim()));
      bare.once("exit", (code) => reject(new Error(`the bare server exited (${code}) before listening`)));
    });
    return list
      ? await load(label, `${url}/bare-list`, {
          durationSec: DURATION,
          connections: LIST_CONNECTIONS,
          headers: list.headers ?? {},
        })
      : await load(label, `${url}/bare`, { durationSec: DURATION });
  } finally {
    bare.kill("SIGTERM");
  }
}

const pg = await startPostgres();
try {
  const sqlite = await measure("sqlite", {});
  const postgres = await measure("postgres", { KEELSON_DATABASE_URL: await pg.createDatabase(), ...secretsKeyEnv() });
  const bareRounds: { http: LoadResult; https: LoadResult }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    bareRounds.push({
      http: await bareRoute("bare fastify route (same payload) http", sqlite.payload),
      https: await bareRoute("bare fastify route (same payload) https", sqlite.payload, join(sqlite.dataDir, "tls")),
    });
  }
  const listFile = join(tmpdir(), `keelson-bench-list-${process.pid}.json`);
  writeFileSync(listFile, sqlite.listBody);
  const bareList = await bareRoute(
    `bare fastify route, the list pre-serialised (${LIST_CONNECTIONS} conns)`,
    null,
    undefined,
    {
      file: listFile,
    },
  );
  const baseline = mean(bareRounds.map((r) => r.http));
  const baselineTls = mean(bareRounds.map((r) => r.https));

  printTable([
    baseline,
    baselineTls,
    sqlite.http.single,
    sqlite.https.single,
    postgres.http.single,
    postgres.https.single,
    sqlite.http.list,
    sqlite.https.list,
    postgres.http.list,
    postgres.https.list,
  ]);
  const ratio = (a: LoadResult, b: LoadResult) => (a.requestsPerSec / b.requestsPerSec).toFixed(2);
  const pctOf = (a: LoadResult, b: LoadResult) => `${((a.requestsPerSec / b.requestsPerSec) * 100).toFixed(0)}%`;
  const tlsLine = (name: string, https: LoadResult, http: LoadResult) =>
    `  ${name}: https at ${pctOf(https, http)} of http (${https.requestsPerSec.toFixed(0)} vs ${http.requestsPerSec.toFixed(0)} req/s), p99 ${https.p99.toFixed(1)} vs ${http.p99.toFixed(1)} ms`;
  process.stdout.write(
    [
      `cluster create: sqlite ${sqlite.createPerSec.toFixed(0)}/s, postgres ${postgres.createPerSec.toFixed(0)}/s`,
      `single read (http): sqlite at ${pctOf(sqlite.http.single, baseline)} of the bare route, postgres at ${pctOf(postgres.http.single, baseline)} (targets: >= 40%; postgres within 1.5x of sqlite: sqlite/postgres = ${ratio(sqlite.http.single, postgres.http.single)})`,
      `list of ${CLUSTERS} (http): sqlite/postgres = ${ratio(sqlite.http.list, postgres.http.list)} (target <= 1.5)`,
      `what TLS costs (KEELSON_TLS=auto, keep-alive connections; each row the mean of ${ROUNDS} rounds, http and https in turn):`,
      tlsLine("bare route", baselineTls, baseline),
      tlsLine("sqlite single read", sqlite.https.single, sqlite.http.single),
      tlsLine("postgres single read", postgres.https.single, postgres.http.single),
      tlsLine(`sqlite list of ${CLUSTERS}`, sqlite.https.list, sqlite.http.list),
      tlsLine(`postgres list of ${CLUSTERS}`, postgres.https.list, postgres.http.list),
      "",
    ].join("\n"),
  );
  process.stdout.write(`\nthe list of ${CLUSTERS} clusters (issue 18), http, ${LIST_CONNECTIONS} connections:\n`);
  const listRows = (f: Figures) => [f.lists.plain, f.lists.gzip, f.lists.br, f.lists.notModified];
  printTable([bareList, ...listRows(sqlite), ...listRows(postgres)]);
  const coldLine = (name: string, f: Figures) => {
    const { warm, cold, afterOther, settled, warmAfterPause } = f.coldWarm;
    const p50 = (x: { p50: number; mean: number }) => `p50 ${x.p50.toFixed(2)} ms (mean ${x.mean.toFixed(2)})`;
    const ofWarm = (x: { p50: number }) => `${(x.p50 / warm.p50).toFixed(2)}× warm`;
    return [
      `  ${name}: warm ${p50(warm)}; warm after a poll interval's pause and a poll ${p50(warmAfterPause)}`,
      `    after a write of that cluster, its operation ended: ${p50(settled)}, ${ofWarm(settled)}, ${(settled.p50 / warmAfterPause.p50).toFixed(2)}× warm after the same pause (target <= 2)`,
      `    right after that write (before its operation starts, runner START_DELAY_MS): ${p50(cold)}, ${ofWarm(cold)}`,
      `    right after another cluster's write (cached): ${p50(afterOther)}, ${ofWarm(afterOther)}`,
    ].join("\n");
  };
  process.stdout.write(
    [
      `list bytes: plain ${sqlite.lists.bytes.plain}, gzip ${sqlite.lists.bytes.gzip}, br ${sqlite.lists.bytes.br}`,
      `uncompressed list at ${pctOf(sqlite.lists.plain, bareList)} (sqlite) and ${pctOf(postgres.lists.plain, bareList)} (postgres) of the bare route's req/s (target >= 100%); compressed p99 target < 50 ms`,
      `single read (one connection, one request at a time), warm and after writes, ${COLD_ROUNDS} of each in turns:`,
      coldLine("sqlite", sqlite),
      coldLine("postgres", postgres),
      "",
    ].join("\n"),
  );
} finally {
  await pg.stop();
}
