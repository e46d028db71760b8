import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CommandPayload, type NodeReportFrame, PHASES, type PhaseId } from "@keelson/protocol";
import type { CertificateRequest, SignedCertificatePem } from "../../src/link/client.ts";
import type { NodeControllerOptions, NodeLink } from "../../src/node/controller.ts";
import { type Phase, type PhaseContext, PhaseError, type PhaseIntent } from "../../src/phases/index.ts";
import type { ServiceManager, ServiceStatus } from "../../src/services/types.ts";

import { testLog } from "../phases/helpers.ts";

export { tempDir, testLog } from "../phases/helpers.ts";

export async function waitFor(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The link as the node controller sees it: reports recorded, signing answered by `sign`. */
export class FakeLink implements NodeLink {
  connected = true;
  reports: Omit<NodeReportFrame, "type">[] = [];
  signed: CertificateRequest[] = [];
  sign: ((request: CertificateRequest, signal?: AbortSignal) => Promise<SignedCertificatePem>) | undefined;

  sendNodeReport(report: Omit<NodeReportFrame, "type">): boolean {
    if (!this.connected) return false;
    this.reports.push(structuredClone(report));
    return true;
  }

  async signCertificate(request: CertificateRequest, options?: { signal?: AbortSignal }) {
    this.signed.push(request);
    if (!this.sign) throw new Error("this fake link signs nothing");
    return this.sign(request, options?.signal);
  }

  last(): Omit<NodeReportFrame, "type"> | undefined {
    return this.reports.at(-1);
  }
}

export interface PhaseCall {
  id: PhaseId;
  action: "start" | "stop" | "status";
  intent: PhaseIntent;
  regenerateCerts: boolean;
  /** The node package directory the phase ran with. */
  nodePackage: string;
}

/**
 * Stand-in phases for controller tests: each start writes a marker under the host root's
 * etc/keelson (which the node cleanup removes); a switch file `<host root>/fail-<id>` makes the
 * phase fail, `<host root>/nostop-<id>` makes its stop fail. Every call is recorded.
 */
export function fakePhases(hostRoot: string, calls: PhaseCall[]): Phase[] {
  const marker = (id: string) => join(hostRoot, "etc", "keelson", `${id}.started`);
  const failing = (id: string) => existsSync(join(hostRoot, `fail-${id}`));
  const record = (id: PhaseId, action: PhaseCall["action"], ctx: PhaseContext) =>
    calls.push({
      id,
      action,
      intent: ctx.intent,
      regenerateCerts: ctx.regenerateCerts,
      nodePackage: ctx.config.nodePackage,
    });
  return PHASES.map((def) => ({
    id: def.id,
    async start(ctx) {
      record(def.id, "start", ctx);
      if (failing(def.id)) throw new PhaseError(`${def.id}: the test switch says fail`);
      mkdirSync(join(hostRoot, "etc", "keelson"), { recursive: true });
      writeFileSync(marker(def.id), ctx.intent);
      return undefined;
    },
    async stop(ctx) {
      record(def.id, "stop", ctx);
      if (existsSync(join(hostRoot, `nostop-${def.id}`))) throw new PhaseError(`${def.id}: will not stop`);
      rmSync(marker(def.id), { force: true });
      return undefined;
    },
    async status(ctx) {
      record(def.id, "status", ctx);
      if (failing(def.id)) throw new PhaseError(`${def.id}: the test switch says fail`);
      if (!existsSync(marker(def.id))) throw new PhaseError(`${def.id}: not started`);
      return undefined;
    },
  }));
}

/** A service manager with no services: what the cleanup asks of it, answered. */
export function noServices(): ServiceManager & { uninstalled: string[]; closed: boolean } {
  const stopped = (name: string): ServiceStatus => ({ name, state: "stopped", pid: null, detail: "", restarts: 0 });
  const manager = {
    kind: "direct" as const,
    uninstalled: [] as string[],
    closed: false,
    install: async () => false,
    start: async () => {},
    restart: async () => {},
    stop: async () => {},
    uninstall: async (name: string) => {
      manager.uninstalled.push(name);
    },
    status: async (name: string) => stopped(name),
    waitHealthy: async (name: string) => stopped(name),
    close: () => {
      manager.closed = true;
    },
  };
  return manager;
}

export function joinPayload(overrides: Partial<CommandPayload<"node.join">> = {}): CommandPayload<"node.join"> {
  return {
    clusterId: "cluster-1",
    clusterName: "one",
    role: "worker",
    kubeRoleVersion: "1.29.2-pmk.1",
    settings: { containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16", networkPlugin: "flannel" },
    masterVipVrouterId: "",
    caCertPem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    apiEndpoint: "https://10.0.0.1:443",
    etcdMembers: [],
    ...overrides,
  };
}

/**
 * Options of a node controller driving fake phases with short, fixed reconcile timings, for
 * tests of the controller itself; `overrides` replace any of them.
 */
export function fakeNodeControllerOptions(
  parts: {
    root: string;
    stateDir: string;
    hostRoot: string;
    link: FakeLink;
    calls: PhaseCall[];
    services: ServiceManager;
  },
  overrides: Partial<NodeControllerOptions> = {},
): NodeControllerOptions {
  return {
    stateDir: parts.stateDir,
    nodePackage: join(parts.root, "node-package"),
    hostRoot: parts.hostRoot,
    host: () => ({ hostId: "host-1", hostname: "worker-1", primaryIp: "10.0.0.7" }),
    link: parts.link,
    services: async () => parts.services,
    log: testLog(),
    phases: fakePhases(parts.hostRoot, parts.calls),
    reportIntervalMs: 20,
    tuning: {
      reconcile: {
        checkIntervalMs: 50,
        retryIntervalMs: 10,
        maxRetryIntervalMs: 20,
        retryBudget: 2,
        fullRestartEvery: 0,
        failedRetryIntervalMs: 40,
      },
    },
    ...overrides,
  };
}
