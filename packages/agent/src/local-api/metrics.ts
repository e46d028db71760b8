import { NODE_PHASE_STATUSES, type NodePhaseStatus, PHASE_STATES, type PhaseStatusRecord } from "@keelson/protocol";
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { ServiceManager } from "../services/types.ts";

/**
 * The agent's Prometheus metrics, served at `GET /metrics` on its local listener with the
 * local API's token check (README "Metrics"). Labels are bounded: phase ids, phase states,
 * service names of the node package. Phase and node state are read at scrape time.
 */
export class AgentMetrics {
  readonly registry = new Registry();
  private linkUp = false;
  private connectedOnce = false;
  /** Services the node installed, so their supervisor's restart counts can be read at scrape time. */
  private readonly serviceNames = new Set<string>();
  private services: ServiceManager | undefined;

  private readonly reconnects = new Counter({
    name: "keelson_agent_link_reconnects_total",
    help: "Links to the control plane made again after the first one of this process.",
    registers: [this.registry],
  });
  private readonly askedRestarts = new Counter({
    name: "keelson_agent_service_restarts_requested_total",
    help: "Restarts of a node service the agent asked for (node restarts, upgrades, changed settings), by service.",
    labelNames: ["service"] as const,
    registers: [this.registry],
  });

  constructor(node: () => { nodeStatus: NodePhaseStatus; phases: PhaseStatusRecord[]; clusterId: string | null }) {
    collectDefaultMetrics({ register: this.registry });
    const self = this;
    new Gauge({
      name: "keelson_agent_link_up",
      help: "1 while the link to the control plane is up (helloed and welcomed).",
      registers: [this.registry],
      collect() {
        this.set(self.linkUp ? 1 : 0);
      },
    });
    new Gauge({
      name: "keelson_agent_node_phase",
      help: "1 for each node phase's current state (one series per phase and state), 0 for the others.",
      labelNames: ["phase", "state"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const phase of node().phases) {
          for (const state of PHASE_STATES) this.set({ phase: phase.id, state }, phase.state === state ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "keelson_agent_node_status",
      help: "1 for the node's status (ok, converging, failed) while the host is a cluster member.",
      labelNames: ["status"],
      registers: [this.registry],
      collect() {
        this.reset();
        const snapshot = node();
        if (snapshot.clusterId === null) return;
        for (const status of NODE_PHASE_STATUSES) this.set({ status }, snapshot.nodeStatus === status ? 1 : 0);
      },
    });
    new Gauge({
      name: "keelson_agent_service_restarts",
      help: "Restarts of a node service after it exited, as its supervisor counts them (systemd: 0, it keeps its own).",
      labelNames: ["service"],
      registers: [this.registry],
      async collect() {
        this.reset();
        const services = self.services;
        if (!services) return;
        for (const name of self.serviceNames) {
          const status = await services.status(name).catch(() => undefined);
          if (status) this.set({ service: name }, status.restarts);
        }
      },
    });
  }

  linkConnected(): void {
    if (this.connectedOnce) this.reconnects.inc();
    this.connectedOnce = true;
    this.linkUp = true;
  }

  linkDisconnected(): void {
    this.linkUp = false;
  }

  /** The node's service manager, wrapped so installs and asked restarts are seen. */
  watch(services: ServiceManager): ServiceManager {
    this.services = services;
    return {
      kind: services.kind,
      install: (spec) => {
        this.serviceNames.add(spec.name);
        return services.install(spec);
      },
      restart: (name) => {
        this.askedRestarts.inc({ service: name });
        return services.restart(name);
      },
      start: (name) => services.start(name),
      stop: (name) => services.stop(name),
      uninstall: (name) => services.uninstall(name),
      status: (name) => services.status(name),
      waitHealthy: (name, options) => services.waitHealthy(name, options),
      close: () => services.close(),
    };
  }
}
