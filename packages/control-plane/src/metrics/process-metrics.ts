import { readdirSync, statSync } from "node:fs";
import { collectDefaultMetrics, Gauge, type Registry } from "prom-client";

/**
 * prom-client's defaults whose collector walks every open handle or file descriptor at each scrape.
 * A control plane holds one socket per agent, so these made a scrape's CPU grow with the fleet
 * (`pnpm bench metrics`, profiled: 12 → 36 ms a scrape from 2,000 to 10,000 agents, nearly all
 * in `process._getActiveHandles()` (called twice), `getActiveResourcesInfo()` and a readdir of
 * /proc/self/fd). The handle and resource counts by type are mostly those sockets, which
 * `keelson_agent_links_open` already counts; the open descriptors are served below at flat cost.
 */
const PER_HANDLE_METRICS = [
  "nodejs_active_handles",
  "nodejs_active_handles_total",
  "nodejs_active_resources",
  "nodejs_active_resources_total",
  "process_open_fds",
];

const FD_DIR = "/proc/self/fd";

/**
 * Open descriptors. Since Linux 6.2 the size `stat` gives for /proc/<pid>/fd is the number of
 * open descriptors, counted by the kernel from its bitmap with nothing listed; older kernels
 * give 0, and there the listing (prom-client's way, O(descriptors)) is the only count.
 */
export function openFileDescriptors(): number {
  const size = statSync(FD_DIR).size;
  // The listing holds one descriptor of its own while it reads.
  return size > 0 ? size : readdirSync(FD_DIR).length - 1;
}

/** Process CPU, memory, GC, event-loop lag and descriptors, each at a cost that does not grow with links. */
export function registerProcessMetrics(registry: Registry): void {
  // The event-loop lag is sampled by a timer at this period: prom-client's 10 ms woke an idle
  // server a hundred times a second, half of its CPU (0.63–0.68% of a core against 0.32–0.33%
  // at 100 ms, an empty server over 60 s). Ten samples a second still see a stall of 100 ms.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  for (const name of PER_HANDLE_METRICS) registry.removeSingleMetric(name);
  if (process.platform !== "linux") return;
  new Gauge({
    name: "process_open_fds",
    help: "Number of open file descriptors.",
    registers: [registry],
    collect() {
      this.set(openFileDescriptors());
    },
  });
}
