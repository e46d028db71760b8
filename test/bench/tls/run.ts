// `pnpm bench tls`: what KEELSON_TLS=auto costs, plain HTTP and HTTPS side by side in one run:
// keep-alive throughput of /healthz and of a cluster read (TLS's cost per request once the
// connection is up), and new connections per second (a TCP connect vs a full TLS handshake
// with the server's ECDSA P-256 certificate: what a reconnect storm pays). Prints figures;
// never fails on a time.

import { readFileSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { api, type ServerProc, startServer, trustedFetch } from "../../e2e/support/processes.ts";
import { type LoadResult, load, printTable } from "../support/measure.ts";

const DURATION = Number(process.env.BENCH_DURATION_SEC ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 2000);

interface Figures {
  health: LoadResult;
  read: LoadResult;
  connectsPerSec: number;
}

/** Opens `count` connections one after the other (a TCP connect, or the TLS handshake on top). */
async function connectRate(server: ServerProc, tls: boolean, count: number): Promise<number> {
  const port = Number(new URL(server.url).port);
  const ca = tls ? readFileSync(join(server.dataDir, "tls", "ca.crt"), "utf8") : undefined;
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i++) {
    await new Promise<void>((resolve, reject) => {
      const socket = tls
        ? tlsConnect({ host: "127.0.0.1", port, ca }, () => {
            socket.destroy();
            resolve();
          })
        : netConnect({ host: "127.0.0.1", port }, () => {
            socket.destroy();
            resolve();
          });
      socket.once("error", reject);
    });
  }
  return count / (Number(process.hrtime.bigint() - started) / 1e9);
}

async function measure(label: string, tls: boolean): Promise<Figures> {
  const server = await startServer({
    https: tls,
    env: { KEELSON_LOG_LEVEL: "error", NODE_ENV: "production", KEELSON_TLS: tls ? "auto" : "off" },
  });
  const fetch = tls ? trustedFetch(server.dataDir) : globalThis.fetch;
  try {
    const admin = server.adminToken;
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, admin, {
      fetch,
    });
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, admin, {
      method: "POST",
      body: { name: "bench", containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
      fetch,
    });
    const health = await load(`${label}: GET /healthz`, `${server.url}/healthz`, { durationSec: DURATION });
    const read = await load(
      `${label}: GET /v4/{p}/clusters/{uuid}`,
      `${server.url}/v4/${projectId}/clusters/${created.body.uuid}`,
      {
        headers: { "x-auth-token": admin },
        durationSec: DURATION,
      },
    );
    return { health, read, connectsPerSec: await connectRate(server, tls, CONNECTIONS) };
  } finally {
    await server.stop();
  }
}

const plain = await measure("http", false);
const https = await measure("https", true);
printTable([plain.health, https.health, plain.read, https.read]);
const pct = (a: LoadResult, b: LoadResult) => ((a.requestsPerSec / b.requestsPerSec) * 100).toFixed(0);
process.stdout.write(
  [
    `keep-alive: https at ${pct(https.health, plain.health)}% of http on /healthz, ${pct(https.read, plain.read)}% on a cluster read`,
    `new connections, one after the other: tcp ${plain.connectsPerSec.toFixed(0)}/s (${(1000 / plain.connectsPerSec).toFixed(2)} ms), tls handshake ${https.connectsPerSec.toFixed(0)}/s (${(1000 / https.connectsPerSec).toFixed(2)} ms)`,
    "",
  ].join("\n"),
);
