/**
 * Child process of the rollout benchmark: the simulated fleet (test/sim) with a fixed phase
 * time, so the control plane's time is measured without the simulators in its process.
 */
import { setOutgoingFrameChecks } from "../../sim/deps.ts";
import { type Simulator, startSimulator } from "../../sim/index.ts";
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
      linkUrl?: string;
    }
  | { type: "counts" }
  | { type: "stop" };

process.on("message", async (message: Message) => {
  try {
    if (message.type === "start") {
      sim = await startSimulator({
        url: message.url,
        count: message.count,
        ...(message.adminToken ? { adminToken: message.adminToken } : {}),
        ...(message.projectId ? { projectId: message.projectId } : {}),
        ...(message.bare ? { identities: bareIdentities(message.count) } : {}),
        ...(message.linkUrl ? { linkUrl: message.linkUrl } : {}),
        phaseTimeMs: message.phaseTimeMs,
        concurrency: 500,
        connectTimeoutMs: 300_000,
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
    } else if (message.type === "stop") {
      await sim?.stop();
      process.send?.({ type: "stopped", ...(sim?.stats() ?? {}) });
      process.disconnect();
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});
