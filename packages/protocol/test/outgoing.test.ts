import { afterEach, describe, expect, it } from "vitest";
import {
  type AgentFrame,
  type ControlFrame,
  encodeFrame,
  OutgoingFrameError,
  setOutgoingFrameChecks,
} from "../src/index.ts";
import { sampleHello } from "./fixtures.ts";

afterEach(() => setOutgoingFrameChecks(true));

describe("outgoing frames are checked like incoming ones", () => {
  it("lets a valid frame of either side through unchanged", () => {
    const hello = sampleHello() as AgentFrame;
    expect(JSON.parse(encodeFrame(hello))).toEqual(hello);
    const command: ControlFrame = { type: "command", id: "c1", name: "ping", payload: {}, timeoutMs: 1000 };
    expect(JSON.parse(encodeFrame(command))).toEqual(command);
  });

  it("refuses to send an agent frame the control plane would refuse, saying why", () => {
    const bad = { ...sampleHello(), hostname: "h".repeat(254) } as AgentFrame;
    expect(() => encodeFrame(bad)).toThrow(OutgoingFrameError);
    expect(() => encodeFrame(bad)).toThrow(
      /refusing to send a frame the peer would refuse: bad hello frame: \/hostname/,
    );
  });

  it("refuses to send a control frame the agent would refuse", () => {
    const bad = {
      type: "command",
      id: "c1",
      name: "node.leave",
      payload: { nonsense: true },
    } as unknown as ControlFrame;
    expect(() => encodeFrame(bad)).toThrow(/bad command frame/);
  });

  it("refuses text that is not well-formed Unicode, which a peer's parser refuses too", () => {
    const bad = { ...sampleHello(), hostname: "host-\ud800" } as AgentFrame;
    expect(() => encodeFrame(bad)).toThrow(/\/hostname is not valid Unicode text/);
  });

  it("with the checks off (NODE_ENV=production) sends what it is given", () => {
    setOutgoingFrameChecks(false);
    const bad = { ...sampleHello(), hostname: "h".repeat(254) } as AgentFrame;
    expect(JSON.parse(encodeFrame(bad)).hostname).toHaveLength(254);
  });
});
