import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadWebCliKey } from "../../packages/control-plane/src/domain/webcli/key.ts";
import { issueWebCliToken } from "../../packages/control-plane/src/domain/webcli/tokens.ts";
import type { AgentProc } from "./support/agents.ts";
import { ARTIFACTS, consoleUser, type HeadlessBrowser, launchChromium } from "./support/browser.ts";
import { contrastRatio, measureContrast, parseColor } from "./support/contrast.ts";
import { startNodeAgents, tearDownHosts } from "./support/node-checks.ts";
import type { NodeHostDirs } from "./support/node-hosts.ts";
import { uploadNodePackages } from "./support/node-packages.ts";
import { api, REPO_ROOT, type ServerProc, startServer, tempDir } from "./support/processes.ts";

/**
 * The web console in headless Chromium (Debian's, driven by playwright-core) against a real
 * keelson-server and three real agents (one host each on 127.0.0.71-73, the test node package):
 * a user logs in the Keystone way, creates a cluster (after the API's 400 shows beside the field
 * it names), attaches the three hosts and watches their phases converge, restarts the cluster
 * from the plan it was shown and follows it live to the end, downloads a kubeconfig, and runs
 * `kubectl get nodes` in the Web CLI's terminal (a refused command and refused tokens shown too),
 * and upgrades the three hosts' agents from the hosts page (plan, confirm, progress per host).
 * Screenshots of each page go to test/artifacts/ (gitignored).
 */

const ADMIN = "e2e-admin-token";
const USER = { name: "console-user", password: "console-password-1" };
const HOSTS = [
  { name: "master-71", ip: "127.0.0.71" },
  { name: "worker-72", ip: "127.0.0.72" },
  { name: "worker-73", ip: "127.0.0.73" },
] as const;
/** The cluster is made on the older version so the console can upgrade it to the patch target. */
const FROM = "1.30.6-kls.1";
const PATCH = "1.30.8-kls.1";
/** The agent's own version and the next patch, which the console upgrades the hosts' agents to. */
const AGENT_VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "packages", "agent", "package.json"), "utf8"))
  .version as string;
const NEW_AGENT = AGENT_VERSION.replace(/^(\d+)\.(\d+)\.(\d+).*$/, (_m, a, b, c) => `${a}.${b}.${Number(c) + 1}`);
/** Phases a master and a worker run (packages/protocol/src/phases.ts). */
const PHASES = { "master-71": 21, "worker-72": 15, "worker-73": 15 } as const;

describe("web console in a browser", () => {
  let server: ServerProc;
  let chromium: HeadlessBrowser | undefined;
  let page: Page;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-console-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const pageErrors: string[] = [];
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `console-${name}.png`), fullPage: true });

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN, env: { KEELSON_AGENT_HEARTBEAT_MS: "2000" } });
    projectId = await consoleUser(server.url, ADMIN, USER);
    // The node packages of both versions, as `pnpm pack:node` builds them: nodes run their cluster's.
    await uploadNodePackages(server.url, ADMIN, join(scratch, "packages"), [
      [FROM, "v1.30.6-keelson-standin"],
      [PATCH, "v1.30.8-keelson-standin"],
    ]);
    await startNodeAgents({ serverUrl: server.url, token: ADMIN, projectId, hosts: HOSTS, scratch, agents, dirs, ids });
    chromium = await launchChromium();
    page = await chromium.browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (err) => pageErrors.push(String(err)));
  }, 120_000);

  // A failed step leaves its screenshot and what the page said, to see why.
  afterEach(async (context) => {
    if (context.task.result?.state !== "fail" || !page) return;
    await shot(`failed-${context.task.name.slice(0, 40).replace(/\W+/g, "-")}`).catch(() => {});
    const text = await page
      .locator("main")
      .textContent()
      .catch(() => "");
    context.task.result.errors?.push({
      message: `page: ${(text ?? "").slice(0, 1500)}\npage errors: ${pageErrors.join("\n")}`,
    });
  });

  afterAll(async () => {
    await chromium?.close();
    await tearDownHosts({ agents, server, dirs, scratch });
  }, 60_000);

  it("refuses a wrong password in words, then logs in the Keystone way", async () => {
    await page.goto(`${server.url}/`);
    expect(page.url()).toBe(`${server.url}/ui/`);
    await page.getByLabel("User").fill(USER.name);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Log in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/401|not|invalid/i);
    await page.getByLabel("Password").fill(USER.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Clusters" }).waitFor();
    await shot("login-clusters");
    // The token lives in this tab's sessionStorage only.
    expect(await page.evaluate("Object.keys(localStorage).length")).toBe(0);
    expect(await page.evaluate("sessionStorage.getItem('keelson.session')")).toContain(projectId);
  });

  it("shows the API's 400 beside the field it names, then creates the cluster", async () => {
    await page.getByRole("button", { name: "New cluster" }).click();
    await page.getByLabel("Name", { exact: true }).fill("console-demo");
    await page.getByLabel("Kube role version").fill(FROM);
    await page.getByLabel("Containers CIDR").fill("10.70.0.0/16");
    await page.getByLabel("Services CIDR").fill("10.70.0.0/16");
    await page.getByRole("button", { name: "Create cluster" }).click();
    const inline = page.locator("#cf-servicesCidr-error");
    await inline.waitFor();
    expect(await inline.textContent()).toMatch(/overlap/);
    expect(await page.getByLabel("Services CIDR").getAttribute("aria-invalid")).toBe("true");
    await shot("create-error");
    await page.getByLabel("Services CIDR").fill("10.71.0.0/16");
    await page.getByRole("button", { name: "Create cluster" }).click();
    await page.getByRole("heading", { name: "Cluster console-demo" }).waitFor();
    clusterId = /#\/cluster\/([\w-]+)/.exec(page.url())?.[1] as string;
    const clusters = await api<{ uuid: string; name: string }[]>(`${server.url}/v4/${projectId}/clusters`, ADMIN);
    expect(clusters.body.map((c) => [c.uuid, c.name])).toEqual([[clusterId, "console-demo"]]);
  });

  it("attaches three hosts and shows every node's phases converge in the timeline", async () => {
    for (const h of HOSTS) {
      await page.getByLabel(h.name).selectOption(h.name.startsWith("master") ? "master" : "worker");
    }
    await page.getByRole("button", { name: "Attach", exact: true }).click();
    for (const h of HOSTS) {
      const node = page.locator(`li.node[data-node="${h.name}"]`);
      // Every phase listed, each running but the stop-only drain, the node ok: as reported live.
      await expect
        .poll(
          async () => ({
            phases: await node.locator("li.phase").count(),
            waiting: await node.locator('li.phase:not([data-state="running"]):not([data-phase="drain-pods"])').count(),
            status: await node.locator(".node-head .badge").first().textContent(),
          }),
          { timeout: 120_000, interval: 500 },
        )
        .toEqual({ phases: PHASES[h.name], waiting: 0, status: "ok" });
    }
    await expect.poll(() => page.getByTestId("cluster-status").textContent(), { timeout: 60_000 }).toBe("ok");
    await page.locator("li.node summary").first().click();
    await shot("cluster-converged");
  }, 180_000);

  it("shows the restart plan, starts it and follows it live to the end", async () => {
    await page.getByLabel("Action").selectOption("restart");
    await page.getByLabel("Batch percent of workers (1-100)").fill("50");
    await page.getByRole("button", { name: "Show the plan" }).click();
    const plan = page.getByRole("list", { name: "Rollout plan" }).locator("li");
    // Masters one at a time, then the two workers in batches of 50% of them: one each.
    expect(await plan.allTextContents()).toEqual(["Step 1: master-71", "Step 2: worker-72", "Step 3: worker-73"]);
    await shot("restart-plan");
    await page.getByRole("button", { name: "Start restart" }).click();
    const log = page.getByRole("list", { name: "Live progress of this cluster" });
    await expect
      .poll(() => log.textContent(), { timeout: 150_000, interval: 500 })
      .toMatch(/cluster\.restart finished \(succeeded\)/);
    const lines = await log.locator("li").allTextContents();
    expect(lines.some((l) => /cluster\.restart started/.test(l))).toBe(true);
    expect(lines.some((l) => /cluster\.restart step restart-masters done/.test(l))).toBe(true);
    expect(lines.some((l) => /cluster\.restart step restart-workers done/.test(l))).toBe(true);
    // Batch by batch: each batch as it started and when it was done, in the plan's order.
    const batches = lines.map((l) => /cluster\.restart (restart-\w+: batch .*)$/.exec(l)?.[1]).filter(Boolean);
    expect(batches).toEqual([
      "restart-masters: batch 1 of 1 started: master-71",
      "restart-masters: batch 1 of 1 done: master-71",
      "restart-workers: batch 1 of 2 started: worker-72",
      "restart-workers: batch 1 of 2 done: worker-72",
      "restart-workers: batch 2 of 2 started: worker-73",
      "restart-workers: batch 2 of 2 done: worker-73",
    ]);
    // Node by node: each node's restart showed as it went away from ok and came back.
    for (const h of HOSTS) {
      expect(
        lines.some((l) => l.includes(`${h.name}: ok → `)),
        `${h.name} left ok\n${lines.join("\n")}`,
      ).toBe(true);
      expect(
        lines.some((l) => new RegExp(`${h.name}: \\S+ → ok`).test(l)),
        `${h.name} back ok`,
      ).toBe(true);
    }
    await expect.poll(() => page.getByTestId("cluster-task").textContent()).toMatch(/restart.*success/);
    await shot("restart-done");
  }, 180_000);

  it("shows the upgrade plan before anything starts, then upgrades batch by batch to the patch target", async () => {
    await page.getByLabel("Action").selectOption("upgrade");
    await page.getByLabel("Upgrade to").selectOption("patch");
    await page.getByText(`Target ${PATCH}`).waitFor();
    await page.getByLabel("Batch percent of workers (1-100)").fill("50");
    await page.getByRole("button", { name: "Show the plan" }).click();
    const plan = page.getByRole("list", { name: "Rollout plan" }).locator("li");
    expect(await plan.allTextContents()).toEqual(["Step 1: master-71", "Step 2: worker-72", "Step 3: worker-73"]);
    // Shown, not started: the cluster has no upgrade operation until the plan is confirmed.
    const upgrades = async () =>
      (
        await api<{ kind: string }[]>(`${server.url}/v4/${projectId}/operations?target=${clusterId}`, ADMIN)
      ).body.filter((o) => o.kind === "cluster.upgrade").length;
    expect(await upgrades()).toBe(0);
    await shot("upgrade-plan");
    await page.getByRole("button", { name: "Start upgrade" }).click();
    const log = page.getByRole("list", { name: "Live progress of this cluster" });
    await expect
      .poll(() => log.textContent(), { timeout: 180_000, interval: 500 })
      .toMatch(/cluster\.upgrade finished \((succeeded|failed)\)/);
    const lines = await log.locator("li").allTextContents();
    expect(lines.join("\n")).toMatch(/cluster\.upgrade finished \(succeeded\)/);
    for (const batch of [
      "upgrade-masters: batch 1 of 1 done: master-71",
      "upgrade-workers: batch 1 of 2 done: worker-72",
      "upgrade-workers: batch 2 of 2 done: worker-73",
    ]) {
      expect(
        lines.some((l) => l.endsWith(`cluster.upgrade ${batch}`)),
        `${batch}\n${lines.join("\n")}`,
      ).toBe(true);
    }
    expect(await upgrades()).toBe(1);
    const cluster = await api<{ kubeRoleVersion: string }>(
      `${server.url}/v3/${projectId}/clusters/${clusterId}`,
      ADMIN,
    );
    expect(cluster.body.kubeRoleVersion).toBe(PATCH);
    const nodes = await api<{ name: string; actualKubeRoleVersion: string; clusterUuid: string | null }[]>(
      `${server.url}/v3/${projectId}/nodes`,
      ADMIN,
    );
    expect(nodes.body.filter((n) => n.clusterUuid === clusterId).map((n) => [n.name, n.actualKubeRoleVersion])).toEqual(
      expect.arrayContaining(HOSTS.map((h) => [h.name, PATCH])),
    );
    await expect.poll(() => page.locator("dd").filter({ hasText: PATCH }).count()).toBeGreaterThan(0);
    await shot("upgrade-done");
  }, 240_000);

  it("downloads a kubeconfig for the cluster", async () => {
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download kubeconfig" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("console-demo.yaml");
    const text = readFileSync((await download.path()) as string, "utf8");
    expect(text).toMatch(/^apiVersion: v1/m);
    expect(text).toContain("server: https://127.0.0.71:443");
    expect(text).toMatch(/token: \S+/);
  });

  it("runs kubectl get nodes in the Web CLI's terminal, shows a refusal there, and refused tokens above it", async () => {
    await page.getByRole("link", { name: "Web CLI" }).click();
    await page.getByRole("heading", { name: "Web CLI" }).waitFor();
    await page.getByText("Session: ready").waitFor();
    // xterm's DOM renderer: one div per screen row (spaces may come as no-break spaces).
    const screen = async () =>
      (await page.locator(".xterm-rows > div").allTextContents()).map((l) => l.replace(/\u00a0/g, " ").trimEnd());
    const typeLine = async (line: string) => {
      await page.getByRole("region", { name: "Terminal" }).click();
      await page.keyboard.type(line);
      await page.keyboard.press("Enter");
    };
    // "Session: ready" can show before xterm has drawn the greeting: wait for the line.
    await expect.poll(screen, { timeout: 10_000 }).toContain(`connected to cluster ${clusterId}`);
    await typeLine("kubectl get nodes");
    await expect
      .poll(async () => (await screen()).filter((l) => /^127\.0\.0\.7\d\s/.test(l)).length, { timeout: 30_000 })
      .toBe(3);
    const rows = await screen();
    expect(
      rows.some((l) => /^127\.0\.0\.71\s+Ready\s+control-plane,master\s/.test(l)),
      rows.join("\n"),
    ).toBe(true);
    for (const last of [72, 73]) {
      expect(rows.some((l) => new RegExp(`^127\\.0\\.0\\.${last}\\s+Ready\\s+worker\\s`).test(l))).toBe(true);
    }
    // The prompt follows the output on the next line, without a blank one.
    await expect
      .poll(async () => {
        const now = await screen();
        return now[now.findIndex((l) => l.startsWith("127.0.0.73")) + 1];
      })
      .toBe("$");
    await typeLine("sh");
    await expect
      .poll(async () => (await screen()).join("\n"))
      .toMatch(/sh: not available; a web CLI session runs kubectl only \(type help\)\n\[exit 126\]\n\$(\n|$)/);
    await shot("webcli");

    // The token the page is given, swapped on its way: one expired (the server's 600 s lifetime
    // long past) and one tampered with; the server refuses both and the page says why.
    const expired = issueWebCliToken(loadWebCliKey(server.dataDir), {
      projectId,
      clusterId,
      subject: USER.name,
      now: new Date(Date.now() - 700_000),
    }).token;
    for (const swap of [() => expired, (token: string) => `${token.slice(0, -2)}xx`]) {
      await page.route(`**/v4/${projectId}/webcli/${clusterId}`, async (route) => {
        const response = await route.fetch();
        const issued = (await response.json()) as { token: string };
        await route.fulfill({ response, json: { ...issued, token: swap(issued.token) } });
      });
      await page.reload();
      await expect
        .poll(() => page.getByRole("alert").textContent())
        .toBe("the web CLI token is not valid or has expired; ask for a new one (invalid_token)");
      await page.getByText("Session: closed").waitFor();
      await page.unrouteAll();
    }
    await shot("webcli-refused-token");
    await page.getByRole("link", { name: "Back to the cluster" }).click();
    await page.getByRole("heading", { name: "Cluster console-demo" }).waitFor();
  });

  it("lists hosts with their agents and the project's operations", async () => {
    await page.getByRole("link", { name: "Hosts" }).click();
    await page.getByRole("heading", { name: "Hosts" }).waitFor();
    for (const h of HOSTS) await page.getByRole("rowheader", { name: h.name }).waitFor();
    await page.getByRole("button", { name: "Create a join token" }).click();
    expect(await page.getByLabel("Install command").inputValue()).toMatch(/\S{20,}/);
    await shot("hosts");
    await page.getByRole("link", { name: "Operations" }).click();
    await page.getByRole("heading", { name: "Operations" }).waitFor();
    for (const kind of ["cluster.create", "cluster.attach", "cluster.restart"]) {
      await page.getByRole("rowheader", { name: kind }).first().waitFor();
    }
    await shot("operations");
  });

  it("upgrades the agents of chosen hosts: the plan first, then each host's progress, then the new version in the API", async () => {
    // An agent package of the next patch version, as `pnpm pack:agent` builds it, stored on the control plane.
    const out = join(scratch, "agent-packages");
    execFileSync("pnpm", ["pack:agent", "--version", NEW_AGENT, "--out", out], { cwd: REPO_ROOT, stdio: "pipe" });
    const upload = await fetch(`${server.url}/v1/agentPackages`, {
      method: "POST",
      headers: { "x-auth-token": ADMIN, "content-type": "application/octet-stream" },
      body: readFileSync(join(out, `keelson-agent-${NEW_AGENT}.tar.gz`)),
    });
    expect(upload.status).toBe(200);
    const agentUpgrades = async () =>
      (
        await api<{ kind: string }[]>(`${server.url}/v4/${projectId}/operations?target=${projectId}`, ADMIN)
      ).body.filter((o) => o.kind === "hosts.upgrade").length;

    await page.getByRole("link", { name: "Hosts" }).click();
    await page.getByRole("heading", { name: "Hosts" }).waitFor();
    for (const h of HOSTS) await page.getByLabel(`Upgrade the agent of ${h.name}`).check();
    await page.getByLabel("Agent version").fill(NEW_AGENT);
    await page.getByLabel("Hosts per batch").fill("2");
    await page.getByRole("button", { name: "Show the agent plan" }).click();
    const plan = page.getByRole("list", { name: "Agent upgrade plan" }).locator("li");
    await plan.first().waitFor();
    expect(await plan.allTextContents()).toEqual(["Batch 1: master-71, worker-72", "Batch 2: worker-73"]);
    // Shown, not started: no operation, and every agent still at its version.
    expect(await agentUpgrades()).toBe(0);
    await shot("agent-upgrade-plan");

    await page.getByRole("button", { name: "Start agent upgrade" }).click();
    const progress = page.getByRole("list", { name: "Agent upgrade progress" });
    await progress.waitFor();
    // Each host's line as the page showed it, sampled until the rollout is over.
    const seen: Record<string, string>[] = [];
    const sample = async () => {
      const lines = await progress.locator("li").allTextContents();
      const byHost = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]));
      seen.push(byHost);
      return byHost;
    };
    const done = `done, agent ${NEW_AGENT} running`;
    await expect.poll(sample, { timeout: 150_000, interval: 100 }).toEqual({
      "master-71": `batch 1 of 2: ${done}`,
      "worker-72": `batch 1 of 2: ${done}`,
      "worker-73": `batch 2 of 2: ${done}`,
    });
    // The summary follows the operation's own event, which may come a render after the hosts' lines.
    await expect
      .poll(() => page.getByRole("status").filter({ hasText: "Operation" }).textContent(), { timeout: 10_000 })
      .toMatch(/^Operation [\w-]+: 2 of 2 batches done$/);
    // Batch by batch: worker-73 waited while the first batch went, and was upgrading only after it was done.
    const states = (host: string) => seen.map((s) => s[host]?.replace(/^batch \d of 2: /, ""));
    expect(states("worker-73")[0], JSON.stringify(seen[0])).toBe("waiting");
    const secondStarted = states("worker-73").findIndex((s) => s?.startsWith("upgrading"));
    if (secondStarted >= 0) {
      expect(seen[secondStarted]?.["master-71"]).toBe(`batch 1 of 2: ${done}`);
      expect(seen[secondStarted]?.["worker-72"]).toBe(`batch 1 of 2: ${done}`);
    }
    for (const host of ["master-71", "worker-72"]) {
      expect(states(host).indexOf(done)).toBeLessThan(states("worker-73").indexOf(done));
    }
    await shot("agent-upgrade-done");

    // The API: one hosts.upgrade operation, succeeded; every host reports the new agent, running.
    expect(await agentUpgrades()).toBe(1);
    for (const h of HOSTS) {
      const host = await api<{ host_agent: { version: string; status: string } }>(
        `${server.url}/v1/hosts/${ids[h.name]}`,
        ADMIN,
      );
      expect(host.body.host_agent, h.name).toEqual({ version: NEW_AGENT, status: "running" });
    }
  }, 240_000);

  it("every visible text of each page meets WCAG 2.2 SC 1.4.3 contrast (4.5:1, large 3:1), measured in Chromium", async () => {
    // The formula checked on known pairs first: black on white is 21:1, #767676 on white 4.54:1.
    expect(contrastRatio(parseColor("rgb(0, 0, 0)"), parseColor("rgb(255, 255, 255)"))).toBe(21);
    expect(contrastRatio(parseColor("rgb(118, 118, 118)"), parseColor("rgb(255, 255, 255)"))).toBeCloseTo(4.54, 2);
    // And on a page made to fail: #949494 on white (3.03:1) fails as body text and passes at 24 px;
    // white text on a half-transparent black over white (a mid grey, 3.98:1) fails; hidden text is not read.
    const probe = await (chromium as HeadlessBrowser).browser.newPage();
    try {
      await probe.setContent(`<body style="margin:0;background:#fff;font:16px sans-serif">
        <p id="small" style="color:#949494">small grey</p>
        <p id="large" style="color:#949494;font-size:24px">large grey</p>
        <div style="background:rgba(0,0,0,0.5)"><span id="veil" style="color:#fff">on a veil</span></div>
        <p style="color:#fff">black on black is not here: this is white on white</p>
        <p style="position:absolute;width:1px;height:1px;overflow:hidden;color:#fff">visually hidden</p>
      </body>`);
      const found = await measureContrast(probe);
      expect(found.checked).toBe(4);
      expect(found.failures.map((x) => [x.where, x.ratio, x.required])).toEqual([
        ["p#small", 3.03, 4.5],
        ["span#veil", 3.98, 4.5],
        ["p", 1, 4.5],
      ]);
    } finally {
      await probe.close();
    }
    const checked: Record<string, number> = {};
    const measure = async (name: string, atLeast: number) => {
      const { checked: count, failures } = await measureContrast(page);
      checked[name] = count;
      expect(failures, `${name}: texts under the minimum`).toEqual([]);
      // The measurement saw the page (a blank or unrendered page would pass vacuously).
      expect(count, name).toBeGreaterThanOrEqual(atLeast);
    };
    // Hosts, with the agent upgrade's progress and its status badges on it.
    await measure("hosts", 30);
    // The cluster: nodes with badges, one node's phase timeline open, a restart plan shown.
    await page.goto(`${server.url}/ui/#/cluster/${clusterId}`);
    await page.getByRole("heading", { name: "Cluster console-demo" }).waitFor();
    await page.locator('li.node[data-node="master-71"] summary').click();
    await page.locator('li.node[data-node="master-71"] li.phase').first().waitFor();
    await page.getByLabel("Action").selectOption("restart");
    await page.getByRole("button", { name: "Show the plan" }).click();
    await page.getByRole("list", { name: "Rollout plan" }).waitFor();
    await measure("cluster", 60);
    await page.getByRole("link", { name: "Operations" }).click();
    await page.getByRole("rowheader", { name: "hosts.upgrade" }).waitFor();
    await measure("operations", 30);
    // The clusters list, and the create form with the API's 400 beside its field.
    await page.getByRole("link", { name: "Clusters" }).click();
    await page.getByRole("button", { name: "New cluster" }).click();
    await page.getByLabel("Name", { exact: true }).fill("contrast-check");
    await page.getByLabel("Kube role version").fill(FROM);
    await page.getByLabel("Containers CIDR").fill("10.80.0.0/16");
    await page.getByLabel("Services CIDR").fill("10.80.0.0/16");
    await page.getByRole("button", { name: "Create cluster" }).click();
    await page.locator("#cf-servicesCidr-error").waitFor();
    await measure("clusters-create-error", 15);
    // The web CLI: the terminal's own text (xterm's colours on its black) and the page around it.
    await page.goto(`${server.url}/ui/#/webcli/${clusterId}`);
    await page.getByText("Session: ready").waitFor();
    await expect
      .poll(async () => (await page.locator(".xterm-rows > div").allTextContents()).join("\n"))
      .toContain("connected to cluster");
    await measure("webcli", 5);
    writeFileSync(join(ARTIFACTS, "console-contrast.json"), `${JSON.stringify({ textsChecked: checked }, null, 2)}\n`);
  });

  it("fits a 390 px phone screen without sideways scrolling of the page", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${server.url}/ui/#/cluster/${clusterId}`);
    await page.getByRole("heading", { name: "Cluster console-demo" }).waitFor();
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    await shot("cluster-phone");
  });

  it("updates the cluster from the edit form, and the API reads the change", async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    const read = async () =>
      (await api<{ certExpiryHrs: number }>(`${server.url}/v3/${projectId}/clusters/${clusterId}`, ADMIN)).body;
    expect((await read()).certExpiryHrs).not.toBe(48);
    await page.getByRole("button", { name: "Edit" }).click();
    const form = page.getByRole("region", { name: "Edit cluster" });
    await form.getByLabel("Kubeconfig certificate hours").fill("48");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.waitFor({ state: "detached" });
    await expect.poll(async () => (await read()).certExpiryHrs).toBe(48);
    await shot("cluster-updated");
  });

  it("detaches a worker: the page and the API lose it, and it is a free host again", async () => {
    const worker = page.locator('li.node[data-node="worker-73"]');
    await worker.waitFor();
    await page.getByRole("button", { name: "Detach worker-73" }).click();
    await expect.poll(() => worker.count(), { timeout: 120_000, interval: 500 }).toBe(0);
    const inCluster = await api<{ name: string }[]>(`${server.url}/v4/${projectId}/clusters/${clusterId}/nodes`, ADMIN);
    expect(inCluster.body.map((n) => n.name).sort()).toEqual(["master-71", "worker-72"]);
    const node = await api<{ clusterUuid: string | null }>(
      `${server.url}/v4/${projectId}/nodes/${ids["worker-73"]}`,
      ADMIN,
    );
    expect(node.body.clusterUuid).toBeNull();
    // Offered for attaching again.
    await page.getByLabel("worker-73").waitFor({ timeout: 60_000 });
    await shot("worker-detached");
  }, 180_000);

  it("deletes the cluster only after confirmation", async () => {
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    const dialog = page.getByRole("alertdialog");
    expect(await dialog.textContent()).toMatch(/Delete cluster console-demo\?.*cannot be undone/);
    await shot("delete-confirm");
    // Keeping it changes nothing.
    await dialog.getByRole("button", { name: "Keep it" }).click();
    await dialog.waitFor({ state: "detached" });
    expect((await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN)).status).toBe(200);
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("button", { name: "Yes, delete console-demo" }).click();
    await page.getByRole("heading", { name: "Clusters" }).waitFor();
    await expect
      .poll(async () => (await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN)).status, {
        timeout: 120_000,
        interval: 1_000,
      })
      .toBe(404);
    await expect.poll(() => page.getByText("console-demo").count(), { timeout: 30_000 }).toBe(0);
    await shot("cluster-deleted");
  }, 180_000);

  it("logs out: the tab forgets the token and the server ends the session", async () => {
    const token = await page.evaluate<string>("JSON.parse(sessionStorage.getItem('keelson.session')).token");
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("button", { name: "Log in" }).waitFor();
    expect(await page.evaluate("sessionStorage.getItem('keelson.session')")).toBeNull();
    const after = await api(`${server.url}/v4/${projectId}/clusters`, token);
    expect(after.status).toBe(403);
    // The login page, with its refusal shown, meets SC 1.4.3 as the other pages do.
    await page.getByLabel("User").fill(USER.name);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").waitFor();
    const login = await measureContrast(page);
    expect(login.failures).toEqual([]);
    expect(login.checked).toBeGreaterThanOrEqual(5);
  });
});
