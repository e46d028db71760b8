import { describe, expect, it } from "vitest";
import { blockContains, blocksOverlap, formatIpv4, nthAddress, parseIpv4, parseIpv4Cidr } from "../src/index.ts";

describe("IPv4 arithmetic", () => {
  it("parses dotted quads strictly and formats them back", () => {
    expect(parseIpv4("10.0.0.10")).toBe(167772170);
    expect(formatIpv4(167772170)).toBe("10.0.0.10");
    expect(parseIpv4("255.255.255.255")).toBe(2 ** 32 - 1);
    for (const bad of ["010.0.0.1", "256.0.0.1", "1.2.3", "1.2.3.4.5", "a.b.c.d", "", " 1.2.3.4"]) {
      expect(parseIpv4(bad), bad).toBeUndefined();
    }
  });

  it("parses a CIDR whose address is its network address, and says what was meant otherwise", () => {
    expect(parseIpv4Cidr("10.20.0.0/16")).toEqual({
      ok: true,
      block: { start: parseIpv4("10.20.0.0"), end: parseIpv4("10.20.255.255"), prefix: 16 },
    });
    expect(parseIpv4Cidr("10.20.1.0/16")).toEqual({ ok: false, problem: "host-bits", network: "10.20.0.0/16" });
    for (const bad of ["10.20.0.0", "10.20.0.0/33", "10.20.0/16", "x/8"]) {
      expect(parseIpv4Cidr(bad), bad).toEqual({ ok: false, problem: "syntax" });
    }
  });

  it("answers containment, overlap and the nth address of a block", () => {
    const block = (text: string) => {
      const parsed = parseIpv4Cidr(text);
      if (!parsed.ok) throw new Error(text);
      return parsed.block;
    };
    const services = block("10.21.0.0/16");
    expect(nthAddress(services, 1)).toBe("10.21.0.1");
    expect(nthAddress(services, 10)).toBe("10.21.0.10");
    expect(blockContains(services, parseIpv4("10.21.255.255") as number)).toBe(true);
    expect(blockContains(services, parseIpv4("10.22.0.0") as number)).toBe(false);
    expect(blocksOverlap(block("10.20.0.0/16"), block("10.20.128.0/17"))).toBe(true);
    expect(blocksOverlap(block("10.20.0.0/16"), block("10.21.0.0/16"))).toBe(false);
  });
});
