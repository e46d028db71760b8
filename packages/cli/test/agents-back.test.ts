import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Api } from "../src/api.ts";
import { waitHostsBack } from "../src/release/agents-back.ts";

/**
 * "Agents back" after a control-plane restart counts hosts, not links: a stand-in for the
 * control plane's `/v1/hosts` (and `/readyz`, whose link count is what the upgrade used to wait
 * for) answers with a script of states.
 */

type Host = { id: string; info: { hostname: string }; responding: boolean };
const servers: Server[] = [];
const apis: Api[] = [];
afterEach(async () => {
  await Promise.all(apis.splice(0).map((a) => a.close()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A control plane whose hosts are `states[i]` at its i-th `/v1/hosts` answer (the last one after). */
async function controlPlane(states: Host[][], links: number): Promise<{ api: Api; asked: () => number }> {
  let asked = 0;
  const server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/readyz") res.end(JSON.stringify({ status: "ready", agentLinks: { open: links } }));
    else if (req.url === "/v1/hosts") res.end(JSON.stringify(states[Math.min(asked++, states.length - 1)]));
    else res.writeHead(404).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(server);
  const api = new Api({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 2_000 });
  apis.push(api);
  return { api, asked: () => asked };
}

const host = (n: number, responding: boolean): Host => ({ id: `h${n}`, info: { hostname: `web-${n}` }, responding });

describe("agents back, by host", () => {
  it("does not let a flapping host's second link stand in for a host that is away", async () => {
    // Two links open (web-1's old one not closed yet, and its new one); web-2 is away.
    const { api } = await controlPlane([[host(1, true), host(2, false)]], 2);
    expect((await api.get<{ agentLinks: { open: number } }>("/readyz")).agentLinks.open).toBe(2);
    const missing = await waitHostsBack(api, ["h1", "h2"], 0.3, 50);
    expect(missing).toBe("only 1 of 2 hosts reconnected within 0.3 s: not back web-2 (h2)");
  });

  it("is done once every host that was connected is connected again, whatever else is", async () => {
    const { api, asked } = await controlPlane(
      [
        [host(1, false), host(2, false), host(3, true)],
        [host(1, true), host(2, false), host(3, false)],
        [host(1, true), host(2, true), host(3, false)],
      ],
      2,
    );
    expect(await waitHostsBack(api, ["h1", "h2"], 5, 20)).toBeUndefined();
    expect(asked()).toBe(3);
  });

  it("names a host the restored database no longer knows, and a server that never answers", async () => {
    const { api } = await controlPlane([[host(1, true)]], 1);
    expect(await waitHostsBack(api, ["h1", "h9"], 0.2, 50)).toBe(
      "only 1 of 2 hosts reconnected within 0.2 s: not back (no longer known) (h9)",
    );
    const away = new Api({ url: "http://127.0.0.1:9", timeoutMs: 200 });
    apis.push(away);
    expect(await waitHostsBack(away, ["h1"], 0.2, 50)).toBe(
      "only 0 of 1 hosts reconnected within 0.2 s (the server did not answer)",
    );
  });
});
