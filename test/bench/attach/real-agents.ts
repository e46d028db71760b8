import { rmSync } from "node:fs";
import { join, relative } from "node:path";
import { PHASES } from "../../../packages/protocol/src/phases.ts";
import { type AgentProc, startAgent, waitForAgents } from "../../e2e/support/agents.ts";
import {
  killNodeServices,
  liveServicePids,
  NODE_PACKAGE,
  type NodeHostDirs,
  nodeHostDirs,
  nodeHostEnv,
} from "../../e2e/support/node-hosts.ts";
import { api, programCommandLine, REPO_ROOT, startServer, tempDir, waitUntil } from "../../e2e/support/processes.ts";
import { sampleWindow } from "../agents/proc-stats.ts";

/**
 * The second half of the attach benchmark: three real keelson-agent processes (own primary IP
 * in 127.0.0.0/8, state dir and host root; the test node package: real etcd, stand-ins for the
 * Kubernetes binaries) attached to one cluster, a master then two workers, and the wall time of
 * each phase as the agents report it (`durationMs` in GET /v1/hosts/{uuid}).
 */

const ADMIN = "bench-admin-token";
export const HOSTS = [
  { name: "bench-master-31", ip: "127.0.0.31", role: "master" },
  { name: "bench-worker-32", ip: "127.0.0.32", role: "worker" },
  { name: "bench-worker-33", ip: "127.0.0.33", role: "worker" },
] as const;

interface Phase {
  id: string;
  state: string;
  durationMs: number | null;
}

export interface RealAgentsResult {
  /** From the attach request to the operation finished, per step. */
  masterAttachMs: number;
  workersAttachMs: number;
  detachAllMs: number;
  /** Phase id -> duration per host name. */
  phases: Map<string, Record<string, number | null>>;
  /** The master's services once attached: steady RSS and CPU over a 5 s window, per service. */
  masterServices: { service: string; rssMiB: number; cpuPercent: number }[];
  errors: string[];
}

/**
 * `root`: the checkout whose keelson-server, keelson-agent and test node package run (default
 * this one; a previous release's worktree for the side-by-side, test/bench/support/previous-revision.ts).
 * Only the harness is this tree's: the API calls it makes are the same in both.
 */
export async function benchRealAgents(
  log: (line: string) => void,
  root: string = REPO_ROOT,
): Promise<RealAgentsResult> {
  const scratch = tempDir("keelson-bench-real-");
  const server = await startServer({ adminToken: ADMIN, env: { KEELSON_AGENT_HEARTBEAT_MS: "2000" }, root });
  const agents: AgentProc[] = [];
  const dirs: NodeHostDirs[] = [];
  const errors: string[] = [];
  try {
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    for (const h of HOSTS) {
      const join1 = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/joinTokens`, ADMIN, {
        method: "POST",
        body: {},
      });
      const d = nodeHostDirs(join(scratch, h.name));
      dirs.push(d);
      agents.push(
        await startAgent({
          name: h.name,
          controlPlane: server.url,
          joinToken: join1.body.token,
          stateDir: join(scratch, h.name, "state"),
          env: nodeHostEnv(d, h.ip, { KEELSON_NODE_PACKAGE: join(root, relative(REPO_ROOT, NODE_PACKAGE)) }),
          root,
        }),
      );
    }
    const ids = await waitForAgents(
      server.url,
      projectId,
      ADMIN,
      HOSTS.map((h) => h.name),
    );
    log(
      `3 real agents connected; server: ${programCommandLine(server)}; agent: ${programCommandLine(agents[0] as AgentProc)}`,
    );
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: { name: "bench-real", containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
    });
    const clusterId = created.body.uuid;
    const settled = async (what: string) =>
      waitUntil(
        what,
        async () => {
          const ops = await api<{ state: string; error: string | null }[]>(
            `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
            ADMIN,
          );
          const op = ops.body[0];
          if (op?.state === "failed") errors.push(`${what}: ${op.error}`);
          return op && (op.state === "succeeded" || op.state === "failed");
        },
        180_000,
        50,
      );
    await settled("create");

    const attach = async (entries: { uuid: string; isMaster: boolean }[], what: string) => {
      const t0 = performance.now();
      const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/${what}`, ADMIN, {
        method: "POST",
        body: entries,
      });
      if (res.status !== 200) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
      await settled(what);
      return performance.now() - t0;
    };
    const master = HOSTS[0];
    const masterAttachMs = await attach([{ uuid: ids[master.name] as string, isMaster: true }], "attach");
    log(`real master attached in ${masterAttachMs.toFixed(0)} ms`);
    const workersAttachMs = await attach(
      HOSTS.slice(1).map((h) => ({ uuid: ids[h.name] as string, isMaster: false })),
      "attach",
    );
    log(`2 real workers attached in ${workersAttachMs.toFixed(0)} ms`);
    // Every service of the master sampled side by side in one window: the controllers' cost
    // beside the API server's and the kubelet's, on the same machine at the same time.
    const pids = liveServicePids(dirs[0] as NodeHostDirs);
    const masterServices = await Promise.all(
      Object.entries(pids).map(async ([service, pid]) => {
        const sample = await sampleWindow(pid, 5);
        return { service, rssMiB: sample.rssMiB, cpuPercent: sample.cpuPercent };
      }),
    );

    const phases = new Map<string, Record<string, number | null>>(PHASES.map((p) => [p.id, {}]));
    for (const h of HOSTS) {
      const record = await api<{ phases: Phase[] }>(`${server.url}/v1/hosts/${ids[h.name]}`, ADMIN);
      for (const p of record.body.phases) {
        // A revision's phase missing from this tree's catalogue still gets its row (at the end).
        const row = phases.get(p.id) ?? {};
        phases.set(p.id, row);
        row[h.name] = p.durationMs;
      }
    }
    const detachAllMs = await attach(
      [
        ...HOSTS.slice(1).map((h) => ({ uuid: ids[h.name] as string, isMaster: false })),
        { uuid: ids[master.name] as string, isMaster: true },
      ],
      "detach",
    );
    log(`3 real nodes detached in ${detachAllMs.toFixed(0)} ms`);
    return { masterAttachMs, workersAttachMs, detachAllMs, phases, masterServices, errors };
  } finally {
    await Promise.all(agents.map((a) => a.stop("SIGTERM", 10_000)));
    await server.stop();
    for (const d of dirs) killNodeServices(d);
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The master's services, heaviest first (the two controllers are new in issue 10). */
export function masterServiceTable(result: RealAgentsResult): string {
  const rows = [...result.masterServices]
    .sort((a, b) => b.rssMiB - a.rssMiB)
    .map((s) => `| ${s.service} | ${s.rssMiB.toFixed(1)} | ${s.cpuPercent.toFixed(1)} |`);
  const total = result.masterServices.reduce((sum, s) => sum + s.rssMiB, 0);
  const controllers = result.masterServices
    .filter((s) => s.service === "kube-controller-manager" || s.service === "kube-scheduler")
    .reduce((sum, s) => sum + s.rssMiB, 0);
  return [
    "| master service | RSS MiB | CPU % of a core |",
    "|---|---|---|",
    ...rows,
    `| all | ${total.toFixed(1)} | |`,
    "",
    `kube-controller-manager + kube-scheduler: ${controllers.toFixed(1)} MiB of ${total.toFixed(1)} MiB on the master (stand-ins: Node.js processes, not the real binaries)`,
  ].join("\n");
}

export function phaseTable(result: RealAgentsResult): string {
  const names = HOSTS.map((h) => h.name);
  const head = `| # | phase | ${names.map((n, i) => `${n} (${HOSTS[i]?.role}) ms`).join(" | ")} |`;
  const sep = `|---|---|${names.map(() => "---").join("|")}|`;
  const fmt = (v: number | null | undefined) => (v === undefined ? "–" : v === null ? "(not run)" : String(v));
  const rows = PHASES.map(
    (p) => `| ${p.order} | ${p.id} | ${names.map((n) => fmt(result.phases.get(p.id)?.[n])).join(" | ")} |`,
  );
  const totals = names.map((n) =>
    [...result.phases.values()].reduce((sum, row) => sum + (typeof row[n] === "number" ? (row[n] as number) : 0), 0),
  );
  return [head, sep, ...rows, `| | sum of phases | ${totals.join(" | ")} |`].join("\n");
}
