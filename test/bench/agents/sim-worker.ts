/**
 * Child process of the benchmark: runs the simulated fleet (test/sim) so the control plane's
 * CPU and memory are measured without the simulators in the same process.
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
      adminToken?: string;
      projectId?: string;
      count: number;
      linkUrl?: string;
      bare?: boolean;
    }
  | { type: "stop" };

process.on("message", async (message: Message) => {
  try {
    if (message.type === "start") {
      const identities = message.bare ? bareIdentities(message.count) : undefined;
      sim = await startSimulator({
        url: message.url,
        count: message.count,
        ...(message.adminToken ? { adminToken: message.adminToken } : {}),
        ...(message.projectId ? { projectId: message.projectId } : {}),
        ...(identities ? { identities } : {}),
        ...(message.linkUrl ? { linkUrl: message.linkUrl } : {}),
        concurrency: 500,
        connectTimeoutMs: 300_000,
      });
      process.send?.({ type: "started", registerMs: sim.registerMs, connectMs: sim.connectMs, ...sim.stats() });
    } else if (message.type === "stop") {
      await sim?.stop();
      process.send?.({ type: "stopped", ...(sim?.stats() ?? {}) });
      process.disconnect();
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});
