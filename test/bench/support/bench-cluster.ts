import { apiAs } from "./admin-api.ts";

/** An operation as the API shows it, as far as the rollout benches read it. */
export interface BenchOperation {
  uuid: string;
  kind: string;
  state: string;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  /** The replica that holds it (null while unclaimed). */
  replica: string | null;
  attempts: number;
}

/**
 * How often a bench asks whether the operation ended. Each answer carries the operation's
 * params and progress (every node's id, about 120 KB at 1,000 nodes): asked every 20 ms, that
 * alone cost the server about 0.1 ms of CPU per ms of the rollout, so the CPU figure followed
 * the wall time, which the other processes of a loaded machine stretch (PostgreSQL's server
 * among them). The operation's own time comes from its timestamps, not from this.
 */
export const POLL_MS = 250;

/** The operation's own time, from its timestamps (the server's). */
export const serverMs = (op: BenchOperation) =>
  op.startedAt && op.finishedAt ? Date.parse(op.finishedAt) - Date.parse(op.startedAt) : Number.NaN;

/** The cluster's latest operation, as a client polling it reads it (undefined: none yet). */
export async function latestOperation(
  adminToken: string,
  base: string,
  projectId: string,
  clusterId: string,
): Promise<BenchOperation | undefined> {
  const { body } = await apiAs(adminToken)<BenchOperation[]>(
    `${base}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
  );
  return body[0];
}

/** The cluster's latest operation once it succeeded or failed, and the wall time since `t0`. */
export async function awaitOperation(
  adminToken: string,
  base: string,
  projectId: string,
  clusterId: string,
  t0: number,
): Promise<{ op: BenchOperation; wallMs: number }> {
  for (;;) {
    const op = await latestOperation(adminToken, base, projectId, clusterId);
    if (op && (op.state === "succeeded" || op.state === "failed")) return { op, wallMs: performance.now() - t0 };
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/**
 * Creates a cluster at `version` and attaches the first host as its master, then the rest as
 * workers (one attach each), waiting for each operation; answers the cluster's id.
 */
export async function buildBenchCluster(
  adminToken: string,
  base: string,
  projectId: string,
  hosts: { uuid: string }[],
  options: { name: string; version: string },
): Promise<string> {
  const api = apiAs(adminToken);
  const created = await api<{ uuid: string }>(`${base}/v4/${projectId}/clusters`, {
    method: "POST",
    body: { name: options.name, kubeRoleVersion: options.version },
  });
  const clusterId = created.body.uuid;
  await awaitOperation(adminToken, base, projectId, clusterId, performance.now());
  const [first, ...rest] = hosts;
  if (!first) throw new Error("no hosts");
  for (const body of [[{ uuid: first.uuid, isMaster: true }], rest.map((h) => ({ uuid: h.uuid, isMaster: false }))]) {
    const res = await api(`${base}/v4/${projectId}/clusters/${clusterId}/attach`, { method: "POST", body });
    if (res.status !== 200) throw new Error(`attach: ${res.status} ${JSON.stringify(res.body)}`);
    const { op } = await awaitOperation(adminToken, base, projectId, clusterId, performance.now());
    if (op.state !== "succeeded") throw new Error(`attach: ${op.state} (${op.error})`);
  }
  return clusterId;
}
