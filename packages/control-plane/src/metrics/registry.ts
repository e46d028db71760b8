import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { registerProcessMetrics } from "./process-metrics.ts";

/**
 * The control plane's Prometheus metrics (README "Metrics"): one registry per app, not
 * prom-client's global one, so several apps in one process (tests) keep their counts apart.
 * Labels are bounded sets only (command names, operation kinds and states, phase ids, route
 * patterns, status codes); never host, node, cluster or operation ids, whose number grows
 * without limit and would make every scrape and the monitoring store grow with it.
 * What the database holds for the whole service (operations, hosts, rollout progress) is
 * computed at scrape time (scrape-gauges.ts), so counters here hold only what this process saw.
 *
 * Two registries, one scrape: what this replica saw or holds carries a `replica` label
 * (KEELSON_REPLICA_ID; sum those over replicas), while the whole service's figures, the same on
 * every replica, carry none (take `max`, not `sum`): a label would make them look like parts.
 */
export class ControlPlaneMetrics {
  readonly registry = new Registry();
  /** The whole service's gauges, read from the database: no replica label. */
  private readonly wholeService = new Registry();

  readonly agentLinkConnects = new Counter({
    name: "keelson_agent_link_connects_total",
    help: "Agent links that completed their hello on this process.",
    registers: [this.registry],
  });
  readonly agentLinkDisconnects = new Counter({
    name: "keelson_agent_link_disconnects_total",
    help: "Agent links that closed on this process (after their hello).",
    registers: [this.registry],
  });
  readonly agentLinkReconnects = new Counter({
    name: "keelson_agent_link_reconnects_total",
    help: "Hellos from a host that had already connected to this process since it started.",
    registers: [this.registry],
  });
  readonly commandsSent = new Counter({
    name: "keelson_agent_commands_sent_total",
    help: "Commands sent to agents, by command name.",
    labelNames: ["command"] as const,
    registers: [this.registry],
  });
  readonly commandsFailed = new Counter({
    name: "keelson_agent_commands_failed_total",
    help: "Commands that did not succeed, by command name and reason (failed, timeout, offline).",
    labelNames: ["command", "reason"] as const,
    registers: [this.registry],
  });
  readonly commandDuration = new Histogram({
    name: "keelson_agent_command_duration_seconds",
    help: "From sending a command to its result (or failure), by command name and outcome.",
    labelNames: ["command", "outcome"] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900],
    registers: [this.registry],
  });
  readonly operationDuration = new Histogram({
    name: "keelson_operation_duration_seconds",
    help: "From an operation's first start to its end, by kind and final state.",
    labelNames: ["kind", "state"] as const,
    buckets: [0.1, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200],
    registers: [this.registry],
  });
  readonly phaseDuration = new Histogram({
    name: "keelson_node_phase_duration_seconds",
    help: "How long a node phase took to start, as the agents report it, by phase id.",
    labelNames: ["phase"] as const,
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900],
    registers: [this.registry],
  });
  readonly phaseFailures = new Counter({
    name: "keelson_node_phase_failures_total",
    help: "Node phases the agents reported as newly failed, by phase id.",
    labelNames: ["phase"] as const,
    registers: [this.registry],
  });
  readonly eventStreamsEnded = new Counter({
    name: "keelson_event_streams_ended_total",
    help: "Event streams this process ended because their client stopped reading (more unsent than KEELSON_EVENT_STREAM_BUFFER_BYTES).",
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: "keelson_http_request_duration_seconds",
    help: "HTTP requests by method, route pattern (never the raw URL) and status code.",
    labelNames: ["method", "route", "status_code"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });

  constructor(replicaId: string) {
    this.registry.setDefaultLabels({ replica: replicaId });
    // Process CPU, memory, file descriptors, GC and event-loop lag (nodejs_eventloop_lag_seconds).
    registerProcessMetrics(this.registry);
  }

  readonly contentType = this.registry.contentType;

  /** The scrape: this replica's series, then the whole service's. */
  async text(): Promise<string> {
    return `${await this.registry.metrics()}\n${await this.wholeService.metrics()}`;
  }

  /**
   * A gauge whose value is read at scrape time (for counts held elsewhere); `service`: a figure
   * of the whole service (the same on every replica), without the replica label.
   */
  gauge(
    name: string,
    help: string,
    labelNames: readonly string[],
    collect: (gauge: Gauge<string>) => void | Promise<void>,
    scope: "replica" | "service" = "replica",
  ): Gauge<string> {
    return new Gauge({
      name,
      help,
      labelNames,
      registers: [scope === "service" ? this.wholeService : this.registry],
      async collect() {
        await collect(this);
      },
    });
  }
}
