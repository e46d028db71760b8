/**
 * One keelson-server's start-up registration as a process of its own, for the start-race test
 * (replica-start-race.test.ts): it opens the store, says "ready", reads the shared instant (epoch
 * ms, one line on stdin), registers then, prints the outcome, and stays alive (a live process
 * holds its row) until its stdin closes.
 *
 * argv[2]: JSON { dialect, file | url, id }.
 */
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { openStore, parseDatabaseUrl, type Store } from "@keelson/db";
import { ReplicaRefused, registerReplica } from "../src/replicas/registry.ts";
import { SERVER_VERSION } from "../src/version.ts";

const args = JSON.parse(process.argv[2] ?? "{}") as { dialect: string; file?: string; url?: string; id: string };
const store: Store =
  args.dialect === "sqlite"
    ? await openStore({ dialect: "sqlite", file: args.file as string, binaryVersion: SERVER_VERSION })
    : await openStore({
        dialect: "postgres",
        target: parseDatabaseUrl(args.url as string),
        poolSize: 2,
        statementTimeoutMs: 20_000,
        connectTimeoutMs: 5_000,
        startTimeoutMs: 0,
        applicationName: "keelson-start-race",
        binaryVersion: SERVER_VERSION,
      });
process.stdout.write("ready\n");
const at = await new Promise<number>((resolve) => {
  let line = "";
  const onData = (chunk: Buffer) => {
    line += chunk.toString();
    if (!line.includes("\n")) return;
    process.stdin.off("data", onData);
    process.stdin.pause();
    resolve(Number(line.trim()));
  };
  process.stdin.on("data", onData);
});
// Sleep to just before the instant, then spin to it: the registrations start within a millisecond.
await sleep(Math.max(0, at - Date.now() - 20));
while (Date.now() < at) {}
let outcome: string;
try {
  await registerReplica(
    store.db,
    { id: args.id, url: "http://127.0.0.1:1", version: SERVER_VERSION, host: hostname(), pid: process.pid },
    10_000,
  );
  outcome = "registered";
} catch (err) {
  outcome = err instanceof ReplicaRefused ? `refused: ${err.message}` : `failed: ${String(err)}`;
}
process.stdout.write(`${outcome}\n`);
process.stdin.resume();
process.stdin.on("end", () => {
  void store.close().then(() => process.exit(0));
});
