import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleUser, type HeadlessBrowser, launchChromium } from "./support/browser.ts";
import { api, type ServerProc, startServer } from "./support/processes.ts";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.ts";

/**
 * The console's live pages in headless Chromium across a cut of the events stream: the page is
 * served through a TCP proxy in front of a real keelson-server (the network), which resets every
 * connection and refuses new ones for a while. The operations page reconnects by itself with
 * `Last-Event-ID` (the browser's own request headers show it), and the operations started while
 * it was cut off appear without a reload of the page.
 */

const ADMIN = "e2e-admin-token";
const USER = { name: "events-user", password: "events-password-1" };

describe("the console's events stream in a browser", () => {
  let server: ServerProc;
  let proxy: TcpProxy;
  let chromium: HeadlessBrowser | undefined;
  let page: Page;
  let projectId: string;
  /** The Last-Event-ID of each events request the page made (undefined: none). */
  const streams: (string | undefined)[] = [];

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN });
    projectId = await consoleUser(server.url, ADMIN, USER);
    const { hostname, port } = new URL(server.url);
    proxy = await startTcpProxy({ host: hostname, port: Number(port) });
    chromium = await launchChromium();
    page = await chromium.browser.newPage();
    page.setDefaultTimeout(15_000);
    page.on("request", (request) => {
      if (/\/v4\/[^/]+\/events$/.test(new URL(request.url()).pathname))
        streams.push(request.headers()["last-event-id"]);
    });
  }, 120_000);

  afterAll(async () => {
    await chromium?.close();
    await proxy?.close();
    await server?.stop();
  }, 60_000);

  const createCluster = async (name: string) => {
    const res = await api(`${server.url}/v4/${projectId}/clusters`, ADMIN, { method: "POST", body: { name } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  const creates = () => page.getByRole("rowheader", { name: "cluster.create" }).count();

  it("the operations page resumes after a cut with Last-Event-ID and shows what happened meanwhile", async () => {
    await page.goto(`${proxy.url}/`);
    await page.getByLabel("User").fill(USER.name);
    await page.getByLabel("Password").fill(USER.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("link", { name: "Operations" }).click();
    await page.getByRole("heading", { name: "Operations" }).waitFor();
    await expect.poll(() => streams.length).toBeGreaterThanOrEqual(1);
    await createCluster("before-cut");
    await expect.poll(creates).toBe(1);

    proxy.refuse(true);
    proxy.cut();
    const opened = streams.length;
    await createCluster("in-gap-1");
    await createCluster("in-gap-2");
    await new Promise((r) => setTimeout(r, 1_500));
    proxy.refuse(false);

    // Back without a reload of the page: the resumed stream replays the two creates.
    await expect.poll(creates, { timeout: 20_000 }).toBe(3);
    const resumed = streams.slice(opened);
    expect(resumed.length).toBeGreaterThanOrEqual(1);
    for (const id of resumed) expect(id).toMatch(/^\d+$/);
    expect(await page.getByRole("alert").count()).toBe(0);
  });
});
