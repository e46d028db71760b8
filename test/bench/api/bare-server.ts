// Baseline for the API benchmark: a bare Fastify route answering a fixed JSON document of the
// same size as a cluster record, on the same machine, so the ratio shows Keelson's own cost
// (auth, SQLite reads, presenting) rather than the machine's speed.
import Fastify from "fastify";

const payload = JSON.parse(process.env.BARE_PAYLOAD ?? "{}");
const app = Fastify({ logger: false });
app.get("/bare", async () => payload);
const address = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`${address}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
