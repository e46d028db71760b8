import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_LINK_PATH } from "@keelson/protocol";
import { afterAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { defaultLinkLimit, LinkCapacity, readOpenFileLimit } from "../src/agents/link-capacity.ts";
import { ADMIN_TOKEN, createTestApp } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "keelson-limits-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the open-file limit", () => {
  it("is read from /proc/self/limits (soft and hard), and a limits file without one reads as none", () => {
    const file = join(dir, "limits");
    writeFileSync(
      file,
      "Limit                     Soft Limit           Hard Limit           Units     \n" +
        "Max cpu time              unlimited            unlimited            seconds   \n" +
        "Max open files            1024                 20000                files     \n",
    );
    expect(readOpenFileLimit(file)).toEqual({ soft: 1024, hard: 20000 });
    writeFileSync(file, "Max open files            unlimited            unlimited            files\n");
    expect(readOpenFileLimit(file)).toBeUndefined();
    expect(readOpenFileLimit(join(dir, "missing"))).toBeUndefined();
    const own = readOpenFileLimit();
    expect(own?.soft).toBeGreaterThan(0);
  });

  it("leaves a reserve of 10%, at least 64, for the API, the database and packages", () => {
    expect(defaultLinkLimit(20_000)).toBe(18_000);
    expect(defaultLinkLimit(256)).toBe(192);
    expect(defaultLinkLimit(50)).toBe(1);
  });

  it("says once per crossing when the links come near the ceiling", () => {
    const said: number[] = [];
    const capacity = new LinkCapacity(10, (open) => said.push(open));
    for (const open of [1, 8, 9, 10, 9, 8, 9, 10]) capacity.observe(open);
    expect(said).toEqual([9, 9]);
    expect(capacity.admits(9)).toBe(true);
    expect(capacity.admits(10)).toBe(false);
  });
});

describe("the agent hub at its link ceiling", () => {
  it("refuses links beyond it with 503 and Retry-After before the upgrade, keeps the API answering, and takes them once others leave", async () => {
    const t = await createTestApp({ agentHub: { linkLimit: 2 } });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = t.app.server.address() as AddressInfo;
    const url = `ws://127.0.0.1:${port}${AGENT_LINK_PATH}`;
    const credentials: string[] = [];
    for (const hostname of ["a", "b", "c"]) {
      const joinToken = (
        await t.request({
          method: "POST",
          url: `/v1/projects/${t.projectId}/joinTokens`,
          payload: {},
          token: ADMIN_TOKEN,
        })
      ).json().token;
      const res = await t.request({
        method: "POST",
        url: "/v1/agents/register",
        payload: { joinToken, hostname },
        token: null,
      });
      credentials.push(res.json().credential);
    }
    const open = (credential: string) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(url, { headers: { authorization: `Bearer ${credential}` } });
        ws.once("open", () => resolve(ws));
        ws.once("unexpected-response", (_req, res) => {
          let body = "";
          res.on("data", (c) => (body += c));
          res.on("end", () =>
            reject(
              Object.assign(new Error(`HTTP ${res.statusCode}`), {
                status: res.statusCode,
                headers: res.headers,
                body,
              }),
            ),
          );
        });
        ws.once("error", reject);
      });
    const [a, b] = [await open(credentials[0] as string), await open(credentials[1] as string)];
    const refused = (await open(credentials[2] as string).then(
      () => undefined,
      (err) => err,
    )) as { status: number; headers: Record<string, string>; body: string };
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBe("30");
    expect(JSON.parse(refused.body)).toMatchObject({ code: "link_capacity" });

    const ready = await t.request({ url: "/readyz", token: null });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({
      status: "ready",
      agentLinks: { open: 2, limit: 2 },
      warnings: ["agent links near their ceiling: 2 of 2; agents beyond it get 503"],
      conditions: [],
    });
    expect((await t.request({ url: `/v4/${t.projectId}/clusters` })).statusCode).toBe(200);

    const closed = new Promise((resolve) => a.once("close", resolve));
    a.close();
    await closed;
    await new Promise((resolve) => setTimeout(resolve, 50));
    const c = await open(credentials[2] as string);
    expect(c.readyState).toBe(WebSocket.OPEN);
    b.close();
    c.close();
  });
});
