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
      /** An https control plane: the fleet pins its CA by this hash, as agents do. */
      caHash?: string;
      count: number;
      linkUrl?: string;
      bare?: boolean;
    }
  | { type: "storm"; timeoutMs: number }
  | { type: "stop" };

/**
 * A reconnect storm: every link dropped at once without a close frame (a network blip, or the
 * control plane's host losing its sockets), each agent reconnecting on its own backoff. Resolves
 * with the time until every agent was welcomed again.
 */
async function storm(fleet: Simulator, timeoutMs: number): Promise<number> {
  const before = fleet.agents.map((a) => a.connects);
  const relinked = () => fleet.agents.every((a, i) => a.connects > (before[i] as number) && a.connected);
  const started = performance.now();
  for (const agent of fleet.agents) agent.kill();
  while (!relinked()) {
    if (performance.now() - started > timeoutMs) {
      const missing = fleet.agents.filter((a, i) => a.connects <= (before[i] as number));
      const reasons = new Map<string, number>();
      for (const a of missing) {
        const reason = a.fatal?.reason ?? a.lastFailure ?? "no attempt ended yet";
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }
      throw new Error(
        `reconnect storm: ${fleet.agents.length - missing.length}/${fleet.agents.length} agents linked again after ${timeoutMs} ms; ` +
          `the others' last failures: ${JSON.stringify(Object.fromEntries(reasons))}`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - started;
}

process.on("message", async (message: Message) => {
  try {
    if (message.type === "start") {
      const identities = message.bare ? bareIdentities(message.count) : undefined;
      sim = await startSimulator({
        url: message.url,
        count: message.count,
        ...(message.adminToken ? { adminToken: message.adminToken } : {}),
        ...(message.projectId ? { projectId: message.projectId } : {}),
        ...(message.caHash ? { caHash: message.caHash } : {}),
        ...(identities ? { identities } : {}),
        ...(message.linkUrl ? { linkUrl: message.linkUrl } : {}),
        concurrency: 500,
        connectTimeoutMs: 300_000,
      });
      process.send?.({
        type: "started",
        registerMs: sim.registerMs,
        connectMs: sim.connectMs,
        tls: sim.tlsCount(),
        ...sim.stats(),
      });
    } else if (message.type === "storm") {
      if (!sim) throw new Error("storm before start");
      const ms = await storm(sim, message.timeoutMs);
      process.send?.({ type: "stormed", ms, tls: sim.tlsCount(), ...sim.stats() });
    } else if (message.type === "stop") {
      await sim?.stop();
      process.send?.({ type: "stopped", ...(sim?.stats() ?? {}) });
      process.disconnect();
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});
