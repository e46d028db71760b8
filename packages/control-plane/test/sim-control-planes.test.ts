import { createServer } from "node:net";
import { AGENT_CAPABILITIES } from "@keelson/protocol";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, type TestApp } from "./helpers.ts";
import { agentOn, twoReplicasAndAHost, until } from "./replica-fixtures.ts";

/**
 * The simulator's agents given several replicas' URLs (KEELSON_CONTROL_PLANE's list, which
 * `pnpm bench replicas` gives them) behave as the real agent's ControlPlanes: start at the URL
 * their random start picks, move to the next when an attempt fails or a link ends.
 */

/** A loopback port nobody listens on. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const drain = (t: TestApp, id: string) =>
  t.request({ method: "POST", url: `/v1/replicas/${id}/drain`, token: ADMIN_TOKEN });

describe("simulated agents with several control-plane URLs", () => {
  it("an agent whose first URL refuses connections links through the next", async () => {
    const { onA, id } = await twoReplicasAndAHost();
    const dead = `ws://127.0.0.1:${await closedPort()}/v1/agents/link`;
    const agent = agentOn([dead, onA.link], id, { reconnect: true, random: () => 0 });
    try {
      expect(await agent.connect(10_000)).toBe(true);
      // It started at the dead one (random 0: the first URL) and moved on.
      expect(agent.linkUrl).toBe(onA.link);
    } finally {
      await agent.stop();
    }
  });

  it("an agent linked to the replica its random start picked moves to the other when that one drains (its 503 refusals retried, not fatal)", async () => {
    const { a, b, onA, onB, id } = await twoReplicasAndAHost();
    // random 0.5 of two URLs: the second, B.
    const agent = agentOn([onA.link, onB.link], id, { reconnect: true, random: () => 0.5 });
    try {
      expect(await agent.connect(10_000)).toBe(true);
      expect(agent.linkUrl).toBe(onB.link);
      // The hello (and so the capabilities) is the linked replica's only.
      expect(b.app.keelson.agents.supports(id.hostId, AGENT_CAPABILITIES.nodePackages)).toBe(true);

      expect((await drain(a, "cp-b")).statusCode).toBe(202);
      await until("the agent linked again, to A", () => agent.connects === 2 && agent.connected, 15_000);
      expect(agent.linkUrl).toBe(onA.link);
    } finally {
      await agent.stop();
    }

    // Starting at the draining B (random 0: the first URL), refused with 503: not the end of it.
    const again = agentOn([onB.link, onA.link], id, { reconnect: true, random: () => 0 });
    try {
      expect(await again.connect(10_000)).toBe(true);
      expect(again.linkUrl).toBe(onA.link);
      expect(again.fatal).toBeUndefined();
    } finally {
      await again.stop();
    }
  });
});
