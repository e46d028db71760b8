import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Api } from "../src/api.ts";
import { namePeers, otherLiveReplicas } from "../src/release/replica-set.ts";

/**
 * Which replicas an upgrade or a rollback of this one must leave the shared database to: a
 * stand-in for the control plane's `GET /v1/replicas` (the route is tested in control-plane's
 * replicas.test.ts; the whole flow in test/e2e/replicas-rolling-upgrade.test.ts).
 */

const servers: Server[] = [];
const apis: Api[] = [];
afterEach(async () => {
  await Promise.all(apis.splice(0).map((a) => a.close()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function listing(rows: unknown[]): Promise<Api> {
  const server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/v1/replicas") res.end(JSON.stringify(rows));
    else res.writeHead(404).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(server);
  const api = new Api({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 2_000 });
  apis.push(api);
  return api;
}

const row = (id: string, live: boolean, self: boolean) => ({
  id,
  url: `http://${id}.example:8080`,
  version: "0.2.0",
  live,
  self,
  agentsHeld: 0,
});

describe("the other live replicas", () => {
  it("are the live rows other than the answering replica's own; a crashed replica's row is not one", async () => {
    const api = await listing([row("cp-1", true, true), row("cp-2", true, false), row("cp-3", false, false)]);
    const peers = await otherLiveReplicas(api);
    expect(peers).toEqual([{ id: "cp-2", url: "http://cp-2.example:8080", version: "0.2.0" }]);
    expect(namePeers(peers)).toBe("cp-2 (0.2.0 at http://cp-2.example:8080)");
  });

  it("are none for a replica alone on its database", async () => {
    expect(await otherLiveReplicas(await listing([row("cp-1", true, true)]))).toEqual([]);
  });
});
