import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeController, NodeMembershipError } from "../../src/node/controller.ts";
import { DESIRED_STATE_FILE, loadDesiredState } from "../../src/node/desired-state.ts";
import {
  FakeLink,
  fakeNodeControllerOptions,
  joinPayload,
  noServices,
  type PhaseCall,
  tempDir,
  waitFor,
} from "./helpers.ts";

/** node.restart and node.upgrade in the node controller, over stand-in phases (issue 5). */

let root: string;
let stateDir: string;
let hostRoot: string;
let link: FakeLink;
let calls: PhaseCall[];
const controllers: NodeController[] = [];

beforeEach(() => {
  root = tempDir("node-restart");
  stateDir = join(root, "state");
  hostRoot = join(root, "host");
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(hostRoot, { recursive: true });
  link = new FakeLink();
  calls = [];
});

afterEach(async () => {
  await Promise.all(controllers.splice(0).map((c) => c.close()));
  rmSync(root, { recursive: true, force: true });
});

function controller(): NodeController {
  const services = noServices();
  const c = new NodeController(fakeNodeControllerOptions({ root, stateDir, hostRoot, link, calls, services }));
  controllers.push(c);
  return c;
}

const ok = () => link.last()?.report.status === "ok" && link.last()?.clusterId === "cluster-1";

describe("node.restart", () => {
  it("reports converging before it answers, drains and stops every phase, starts them again keeping certificates", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    calls.length = 0;
    link.reports = [];
    expect(await node.restart({ clusterId: "cluster-1", regenerateCerts: false })).toEqual({ accepted: true });
    // The first report after the command already says converging (sent before the answer).
    expect(link.reports[0]?.report.status).toBe("converging");
    const stops = calls.filter((c) => c.action === "stop");
    expect(stops[0]?.id).toBe("drain-pods");
    expect(stops.every((c) => c.intent === "stop")).toBe(true);
    expect(stops).toHaveLength(15);
    await waitFor("ok again", ok);
    const starts = calls.filter((c) => c.action === "start");
    expect(starts.map((c) => c.id)).toContain("uncordon");
    expect(starts.some((c) => c.regenerateCerts)).toBe(false);
    // Every start comes after every stop: nothing is left stopped.
    const lastStop = calls.lastIndexOf(stops.at(-1) as PhaseCall);
    expect(calls.findIndex((c) => c.action === "start")).toBeGreaterThan(lastStop);
  });

  it("regenerates certificates when asked, and refuses a cluster it is not in", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    calls.length = 0;
    await node.restart({ clusterId: "cluster-1", regenerateCerts: true });
    await waitFor("gen-certs start", () => calls.some((c) => c.id === "gen-certs" && c.action === "start"));
    expect(calls.find((c) => c.id === "gen-certs" && c.action === "start")?.regenerateCerts).toBe(true);
    await expect(node.restart({ clusterId: "cluster-2", regenerateCerts: false })).rejects.toBeInstanceOf(
      NodeMembershipError,
    );
  });
});

describe("node.upgrade", () => {
  it("persists the new role version and settings, then restarts the phases", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    calls.length = 0;
    const answer = await node.upgrade({
      clusterId: "cluster-1",
      kubeRoleVersion: "9.99.0-kls.1",
      settings: { containerRuntime: "docker" },
    });
    expect(answer).toEqual({ accepted: true });
    const saved = loadDesiredState(join(stateDir, DESIRED_STATE_FILE));
    expect(saved?.join).toMatchObject({ kubeRoleVersion: "9.99.0-kls.1", settings: { containerRuntime: "docker" } });
    expect(calls.filter((c) => c.action === "stop")).toHaveLength(15);
    await waitFor("ok again", ok);
    expect(calls.some((c) => c.action === "start")).toBe(true);
  });
});

describe("the command named in node reports", () => {
  it("names the restart or upgrade the node works for, from its converging on, also after an agent restart", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    // A new membership has carried out no command yet.
    expect(link.reports.every((r) => r.command === undefined)).toBe(true);
    link.reports = [];
    await node.restart({ clusterId: "cluster-1", regenerateCerts: false }, undefined, "op-1:h:node.restart");
    await waitFor("ok again", ok);
    // Every report from the restart's converging on names it; none pairs it with the state before.
    expect(link.reports[0]).toMatchObject({ report: { status: "converging" }, command: "op-1:h:node.restart" });
    expect(link.reports.every((r) => r.command === "op-1:h:node.restart")).toBe(true);
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.command).toBe("op-1:h:node.restart");

    // An agent restart: the resumed phases still show that restart's work.
    await node.close();
    link.reports = [];
    const second = controller();
    await second.resume();
    await waitFor("ok after resume", ok);
    expect(link.reports.length).toBeGreaterThan(0);
    expect(link.reports.every((r) => r.command === "op-1:h:node.restart")).toBe(true);

    link.reports = [];
    await second.upgrade(
      { clusterId: "cluster-1", kubeRoleVersion: "9.99.0-kls.1", settings: {} },
      undefined,
      "op-2:h:node.upgrade",
    );
    await waitFor("ok after upgrade", ok);
    expect(link.reports[0]).toMatchObject({ report: { status: "converging" }, command: "op-2:h:node.upgrade" });
    expect(link.reports.every((r) => r.command === "op-2:h:node.upgrade")).toBe(true);

    // Leaving ends the membership and what it carried out: a later join names nothing.
    await second.leave({ clusterId: "cluster-1", lastNode: true });
    link.reports = [];
    await second.join(joinPayload());
    await waitFor("ok in the new membership", ok);
    expect(link.reports.every((r) => r.command === undefined)).toBe(true);
  });
});
