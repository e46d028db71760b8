// Baseline for the API benchmark: a bare Fastify route answering a fixed JSON document of the
// same size as a cluster record, on the same machine, so the ratio shows Keelson's own cost
// (auth, SQLite reads, presenting) rather than the machine's speed. With BARE_TLS_DIR (a
// keelson-server's <data dir>/tls) it serves HTTPS with that server's certificate and key, so
// the HTTPS baseline pays the same handshake and record costs.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Fastify from "fastify";

const payload = JSON.parse(process.env.BARE_PAYLOAD ?? "{}");
const tlsDir = process.env.BARE_TLS_DIR;
// `https: null` is Fastify's plain HTTP server.
const app = Fastify({
  logger: false,
  https: tlsDir
    ? {
        key: readFileSync(join(tlsDir, "server.key")),
        cert: readFileSync(join(tlsDir, "server.crt")),
        minVersion: "TLSv1.2",
      }
    : null,
});
app.get("/bare", async () => payload);
// The list as issue 18's baseline: the same bytes, pre-serialised, sent as they are.
const listFile = process.env.BARE_LIST_FILE;
if (listFile) {
  const list = readFileSync(listFile);
  app.get("/bare-list", (_request, reply) => reply.type("application/json; charset=utf-8").send(list));
}
const address = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`${address}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
