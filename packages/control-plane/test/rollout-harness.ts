import type { CommandName, CommandPayload } from "@keelson/protocol";
import { expect } from "vitest";
import type { SimAgent } from "../../../test/sim/index.ts";
import { type Fleet, m, w } from "./membership-harness.ts";

/**
 * Helpers for the rolling restart and upgrade tests: clusters built from a shared simulated
 * fleet, and a record of every node.restart / node.upgrade with what the fleet looked like at
 * that moment (which simulated nodes were not back `ok` yet).
 */

export interface RollSend {
  hostId: string;
  name: CommandName;
  at: number;
  /** Simulated nodes of the fleet that were not `ok` when this command was sent. */
  busy: string[];
}

export function recordRolls(f: Fleet): RollSend[] {
  const rolls: RollSend[] = [];
  const hub = f.t.app.keelson.agents;
  const inner = hub.sendCommand.bind(hub);
  hub.sendCommand = (<N extends CommandName>(
    hostId: string,
    name: N,
    payload: CommandPayload<N>,
    opts?: { timeoutMs?: number },
  ) => {
    if (name === "node.restart" || name === "node.upgrade") {
      const busy = f.sim.agents.filter((a) => a.membership && a.nodeStatus !== "ok").map((a) => a.hostId);
      rolls.push({ hostId, name, at: Date.now(), busy });
    }
    return inner(hostId, name, payload, opts);
  }) as typeof hub.sendCommand;
  return rolls;
}

/** Consecutive sends less than `gapMs` apart form one batch. */
export function batchesOf(rolls: RollSend[], gapMs: number): string[][] {
  const batches: string[][] = [];
  let last = -Infinity;
  for (const roll of rolls) {
    if (roll.at - last >= gapMs || batches.length === 0) batches.push([]);
    (batches.at(-1) as string[]).push(roll.hostId);
    last = roll.at;
  }
  return batches;
}

export class FleetAllocator {
  private next = 0;
  constructor(private readonly f: Fleet) {}

  take(n: number): SimAgent[] {
    const agents = this.f.sim.agents.slice(this.next, this.next + n);
    this.next += n;
    if (agents.length < n) throw new Error("fleet too small for the tests");
    return agents;
  }
}

/** A cluster with these masters and workers, all joined and ok. */
export async function readyCluster(
  f: Fleet,
  name: string,
  masters: SimAgent[],
  workers: SimAgent[],
  body: Record<string, unknown> = {},
): Promise<string> {
  const clusterId = await f.createCluster(name, body);
  const res = await f.attach(clusterId, [...masters.map((a) => m(a.hostId)), ...workers.map((a) => w(a.hostId))]);
  expect(res.statusCode, res.body).toBe(200);
  await f.idle();
  expect(await f.cluster(clusterId)).toMatchObject({ status: "ok", taskStatus: "success" });
  return clusterId;
}

export function post(f: Fleet, url: string, payload?: unknown) {
  return f.t.request({
    method: "POST",
    url: `/${url.replace(/^\//, "").replace("{p}", f.t.projectId)}`,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
}
