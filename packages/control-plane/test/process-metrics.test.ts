import fs, { closeSync, openSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ControlPlaneMetrics } from "../src/metrics/registry.ts";
import { parseScrape, sampleValue } from "./prometheus-text.ts";

describe("process metrics at a cost flat in open sockets", () => {
  const opened: number[] = [];
  afterEach(() => {
    for (const fd of opened.splice(0)) closeSync(fd);
    vi.restoreAllMocks();
  });

  it("counts open descriptors without listing them, and walks no handle list", async () => {
    const metrics = new ControlPlaneMetrics("test-replica");
    const scrape = async () => parseScrape(await metrics.registry.metrics());
    const before = sampleValue(await scrape(), "process_open_fds");
    expect(before).toBeGreaterThan(0);

    for (let i = 0; i < 200; i++) opened.push(openSync("/dev/null", "r"));
    const handles = vi.spyOn(process as unknown as { _getActiveHandles: () => unknown[] }, "_getActiveHandles");
    const resources = vi.spyOn(process, "getActiveResourcesInfo");
    const readdir = vi.spyOn(fs, "readdirSync");
    const after = await scrape();

    // Other tests' files may open or close meanwhile; 200 more is what this test did.
    expect(sampleValue(after, "process_open_fds") - before).toBeGreaterThanOrEqual(195);
    expect(sampleValue(after, "process_open_fds") - before).toBeLessThanOrEqual(205);
    expect(handles).not.toHaveBeenCalled();
    expect(resources).not.toHaveBeenCalled();
    // Linux 6.2 and later: stat's size of /proc/self/fd is the count (this machine runs one).
    expect(readdir).not.toHaveBeenCalled();
    for (const gone of ["nodejs_active_handles", "nodejs_active_handles_total", "nodejs_active_resources"]) {
      expect(after.families.has(gone), gone).toBe(false);
    }
    // The rest of prom-client's defaults are still there.
    for (const kept of ["process_cpu_seconds_total", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes"]) {
      expect(after.families.has(kept), kept).toBe(true);
    }
  });
});
