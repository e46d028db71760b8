/**
 * Child process of the rollout benchmark: the simulated fleet (test/sim) with a fixed phase
 * time, so the control plane's time is measured without the simulators in its process.
 */
import { setOutgoingFrameChecks } from "../../sim/deps.ts";
import { type SimIdentity, type Simulator, startSimulator } from "../../sim/index.ts";
import { bareIdentities } from "../support/bare-identities.ts";

// The fleet is measured as production agents run: no check of outgoing frames.
setOutgoingFrameChecks(false);

let sim: Simulator | undefined;

type Message =
  | {
      type: "start";
      url: string;
      /** The keelson run registers the fleet; the bare baseline takes made-up identities. */
      adminToken?: string;
      projectId?: string;
      count: number;
      phaseTimeMs: number;
      bare?: boolean;
      /** Hosts already registered (the replicas bench seeds them through the store). */
      identities?: SimIdentity[];
      /** The agents' hostnames' prefix: several simulator processes on one database need distinct names. */
      namePrefix?: string;
      /** How long an agent may take to link (default 300 s; 45,000 agents link for longer on a loaded machine). */
      connectTimeoutMs?: number;
      /** Registrations and link attempts in flight (default 500). */
      concurrency?: number;
      /** Several replicas' link URLs: each agent starts at a random one (see test/sim). */
      linkUrl?: string | string[];
    }
  | { type: "counts" }
  /** Notes every agent's connects now; "relinked" answers once each has linked again since. */
  | { type: "mark" }
  | { type: "relinked"; timeoutMs: number }
  /** Each agent starts over at a random one of its URLs (the replicas bench). */
  | { type: "spread" }
  /** How many agents are linked through each URL now. */
  | { type: "where" }
  /** The tally of link events so far (SimAgentInit.onLinkEvent), also while "start" still links. */
  | { type: "tally" }
  | { type: "stop" };

let marked: number[] = [];
const tally = new Map<string, number>();
const count = (event: string) => tally.set(event, (tally.get(event) ?? 0) + 1);

/** Resolves with the time (Date.now(), the same clock as the bench's) when every agent linked again since the mark. */
async function relinked(fleet: Simulator, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  const again = () => fleet.agents.every((a, i) => a.connected && a.connects > (marked[i] as number));
  while (!again()) {
    if (Date.now() > deadline) {
      const missing = fleet.agents.filter((a, i) => !(a.connected && a.connects > (marked[i] as number)));
      throw new Error(
        `${missing.length}/${fleet.agents.length} agents not linked again after ${timeoutMs} ms (e.g. ${missing[0]?.hostname}: ${missing[0]?.fatal?.reason ?? missing[0]?.lastFailure})`,
      );
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now();
}

process.on("message", async (message: Message) => {
  try {
    if (message.type === "start") {
      sim = await startSimulator({
        url: message.url,
        count: message.count,
        ...(message.adminToken ? { adminToken: message.adminToken } : {}),
        ...(message.projectId ? { projectId: message.projectId } : {}),
        ...(message.bare ? { identities: bareIdentities(message.count) } : {}),
        ...(message.identities ? { identities: message.identities } : {}),
        ...(message.namePrefix ? { namePrefix: message.namePrefix } : {}),
        ...(message.linkUrl ? { linkUrl: message.linkUrl } : {}),
        phaseTimeMs: message.phaseTimeMs,
        concurrency: message.concurrency ?? 500,
        connectTimeoutMs: message.connectTimeoutMs ?? 300_000,
        onLinkEvent: count,
      });
      process.send?.({ type: "started", registerMs: sim.registerMs, connectMs: sim.connectMs, ...sim.stats() });
    } else if (message.type === "counts") {
      const agents = sim?.agents ?? [];
      process.send?.({
        type: "counts",
        restarts: agents.map((a) => a.restarts),
        upgrades: agents.map((a) => a.upgrades),
        notOk: agents.filter((a) => a.membership && a.nodeStatus !== "ok").length,
      });
    } else if (message.type === "mark") {
      marked = (sim?.agents ?? []).map((a) => a.connects);
      process.send?.({ type: "marked" });
    } else if (message.type === "relinked") {
      if (!sim) throw new Error("relinked before start");
      process.send?.({ type: "relinked", at: await relinked(sim, message.timeoutMs) });
    } else if (message.type === "spread") {
      for (const agent of sim?.agents ?? []) agent.relinkAtRandom();
      process.send?.({ type: "spread" });
    } else if (message.type === "where") {
      const by: Record<string, number> = {};
      for (const a of sim?.agents ?? []) if (a.connected) by[a.linkUrl] = (by[a.linkUrl] ?? 0) + 1;
      process.send?.({ type: "where", by });
    } else if (message.type === "tally") {
      process.send?.({ type: "tally", counts: Object.fromEntries(tally) });
    } else if (message.type === "stop") {
      await sim?.stop();
      process.send?.({ type: "stopped", ...(sim?.stats() ?? {}) });
      process.disconnect();
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});
