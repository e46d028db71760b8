import { AGENT_CAPABILITIES } from "@keelson/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "./helpers.ts";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";

/**
 * `PUT /v4/{project}/hosts/{uuid}/controlPlanePins` (issue 11): the admin's request relayed to
 * the host's agent as control-plane.pins, with bad input refused here first. The agents here
 * are simulated (they link to 127.0.0.1, a name no pin may have); test/e2e/control-plane-pins
 * runs the real agent's address check and re-link.
 */

let f: Fleet;
beforeAll(async () => {
  f = await startFleet(1, { namePrefix: "pin" });
});
afterAll(async () => {
  await f.close();
});

const put = (body: unknown, options: { project?: string; host?: string; token?: string | null } = {}) =>
  f.t.request({
    method: "PUT",
    url: `/v4/${options.project ?? f.t.projectId}/hosts/${options.host ?? f.id(0)}/controlPlanePins`,
    payload: body as object,
    token: options.token === undefined ? ADMIN_TOKEN : options.token,
  });

describe("control-plane pins route", () => {
  it("refuses bad input with 400 naming the field, before any command goes out", async () => {
    const before = f.sent.length;
    const cases: [unknown, string, RegExp][] = [
      [{ pins: [{ name: "cp.keelson.test", ip: "10.0.0.300" }] }, "pins.0.ip", /must be an IPv4 or IPv6 address/],
      [{ pins: [{ name: "10.0.0.1", ip: "10.0.0.2" }] }, "pins.0.name", /must be a host name/],
      [
        {
          pins: [
            { name: "cp.keelson.test", ip: "10.0.0.1" },
            { name: "CP.keelson.test", ip: "10.0.0.2" },
          ],
        },
        "pins.1.name",
        /named twice/,
      ],
      [
        { pins: Array.from({ length: 17 }, (_, i) => ({ name: `cp-${i}.keelson.test`, ip: "10.0.0.1" })) },
        "pins",
        /17|more than 16/,
      ],
      [{ pins: [{ name: "cp.keelson.test", ip: "10.0.0.1", port: 1 }] }, "pins.0.port", /.*/],
      [{}, "pins", /.*/],
    ];
    for (const [body, field, message] of cases) {
      const res = await put(body);
      expect(res.statusCode, res.body).toBe(400);
      const json = res.json() as { code: string; message: string; field: string };
      expect(json.field, res.body).toBe(field);
      expect(json.message).toMatch(message);
    }
    expect(f.sent.length).toBe(before);
  });

  it("is the admin's, and finds hosts of the path's project only", async () => {
    const pins = { pins: [] };
    expect((await put(pins, { token: f.t.token })).statusCode).toBe(403);
    expect((await put(pins, { project: f.t.otherProjectId })).statusCode).toBe(404);
    expect((await put(pins, { host: "no-such-host" })).statusCode).toBe(404);
  });

  it("answers the agent's result, or its refusal as 502 with its words", async () => {
    const cleared = await put({ pins: [] });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json()).toEqual({ pins: [], previous: [] });
    expect(f.sent.at(-1)).toMatchObject({ hostId: f.id(0), name: "control-plane.pins", payload: { pins: [] } });

    const refused = await put({ pins: [{ name: "cp.keelson.test", ip: "127.0.0.2" }] });
    expect(refused.statusCode, refused.body).toBe(502);
    expect(refused.json().message).toMatch(
      /cp\.keelson\.test is not a host name of KEELSON_CONTROL_PLANE \(127\.0\.0\.1\)/,
    );
  });

  it("is refused with 409 for an agent too old to take pins", async () => {
    const agent = f.agent(0);
    const hub = f.t.app.keelson.agents;
    agent.capabilities = [AGENT_CAPABILITIES.images];
    agent.kill();
    await waitFor(
      "the older agent back",
      () =>
        hub.supports(agent.hostId, AGENT_CAPABILITIES.images) === true &&
        hub.supports(agent.hostId, AGENT_CAPABILITIES.controlPlanePins) === false,
    );
    const res = await put({ pins: [] });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ code: "agent_too_old" });
  });
});
