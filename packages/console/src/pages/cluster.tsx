import type { StepBatch } from "@keelson/protocol/api-records";
import { useEffect, useState } from "preact/hooks";
import { call, request, v3, v4 } from "../api.ts";
import { followEvents, type LiveEvent } from "../events.ts";
import type { Session } from "../session.ts";
import { ErrorNote, StatusBadge, useLoad, useStreamLoss, when } from "../ui.tsx";
import { ClusterForm } from "./cluster-form.tsx";
import type { Cluster } from "./clusters.tsx";
import type { Host } from "./hosts.tsx";
import { type Phase, PhaseTimeline } from "./phases.tsx";
import { type ClusterNode, RolloutForm } from "./rollout.tsx";

interface ClusterV3 {
  patchUpgradeRoleVersion?: string;
  minorUpgradeRoleVersion?: string;
}

/** A line of the live rollout log, from the event stream. */
interface LogLine {
  at: string;
  text: string;
}

async function loadAll(session: Session, clusterId: string) {
  const [cluster, v3cluster, nodes, hosts] = await Promise.all([
    call<Cluster>(session, v4(session, `clusters/${clusterId}`)),
    call<ClusterV3>(session, v3(session, `clusters/${clusterId}`)),
    call<ClusterNode[]>(session, v4(session, `clusters/${clusterId}/nodes`)),
    call<Host[]>(session, "/v1/hosts"),
  ]);
  return { cluster, v3cluster, nodes, hosts };
}

export function ClusterPage({ session, clusterId }: { session: Session; clusterId: string }) {
  const data = useLoad(() => loadAll(session, clusterId), [session.token, clusterId]);
  const [log, setLog] = useState<LogLine[]>([]);
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [actionError, setActionError] = useState<unknown>(null);
  const [attachRoles, setAttachRoles] = useState<Record<string, "master" | "worker" | "">>({});
  const [certAuth, setCertAuth] = useState(false);

  const [streamLost, onGiveUp] = useStreamLoss();
  useEffect(() => {
    const names = new Map<string, string>();
    const say = (text: string) => setLog((l) => [...l.slice(-199), { at: new Date().toLocaleTimeString(), text }]);
    const onEvent = (e: LiveEvent) => {
      const d = e.data;
      if (e.name.startsWith("operation.") && d.targetId === clusterId) {
        const batch = d.batch as StepBatch | undefined;
        if (batch) {
          // A rollout's batch: the nodes' own reports below update the page, so nothing to reload.
          const names = batch.nodes.map((n) => n.name).join(", ");
          say(`${String(d.kind)} ${d.step}: batch ${batch.number} of ${batch.of} ${batch.state}: ${names}`);
          return;
        }
        const what = `${String(d.kind)} ${e.name === "operation.step" ? `step ${d.step} done` : e.name.slice(10)}`;
        say(`${what}${d.state ? ` (${d.state})` : ""}${d.error ? `: ${d.error}` : ""}`);
        data.reload();
      } else if (e.name === "node.report" && d.clusterId === clusterId) {
        const hostId = String(d.hostId);
        data.set((cur) => {
          if (!cur) return cur;
          const host = cur.hosts.find((h) => h.id === hostId);
          const node = cur.nodes.find((n) => n.uuid === hostId);
          if (host) names.set(hostId, host.info.hostname);
          if (node && node.status !== d.status) say(`${names.get(hostId) ?? hostId}: ${node.status} → ${d.status}`);
          return {
            ...cur,
            hosts: cur.hosts.map((h) =>
              h.id === hostId ? { ...h, phases: d.phases as Phase[], nodeStatus: String(d.status) } : h,
            ),
            nodes: cur.nodes.map((n) =>
              n.uuid === hostId ? { ...n, status: String(d.status), api_responding: d.apiResponding ? 1 : 0 } : n,
            ),
          };
        });
      } else if (e.name === "node.connected" || e.name === "node.disconnected") {
        data.reload();
      }
    };
    return followEvents(session, onEvent, data.reload, { onGiveUp });
  }, [session.token, clusterId]);

  const act = async (fn: () => Promise<unknown>) => {
    setActionError(null);
    try {
      await fn();
      data.reload();
    } catch (err) {
      setActionError(err);
    }
  };
  if (!data.value) return data.error ? <ErrorNote error={data.error} /> : <p aria-busy="true">Loading…</p>;
  const { cluster, v3cluster, nodes, hosts } = data.value;
  const hostOf = (id: string) => hosts.find((h) => h.id === id);
  const free = hosts.filter((h) => h.clusterUuid === null && h.info.responding);

  const attach = () =>
    act(() =>
      call(session, v4(session, `clusters/${clusterId}/attach`), {
        method: "POST",
        body: Object.entries(attachRoles)
          .filter(([, role]) => role)
          .map(([uuid, role]) => ({ uuid, isMaster: role === "master" })),
      }).then(() => setAttachRoles({})),
    );
  const detach = (n: ClusterNode) =>
    act(() =>
      call(session, v4(session, `clusters/${clusterId}/detach`), {
        method: "POST",
        body: [{ uuid: n.uuid, isMaster: n.isMaster === 1 }],
      }),
    );
  const download = () =>
    act(async () => {
      const res = await request(session, v4(session, `kubeconfig/${clusterId}`), {
        query: certAuth ? { force_cert_auth: true } : {},
      });
      const url = URL.createObjectURL(await res.blob());
      const a = Object.assign(document.createElement("a"), { href: url, download: `${cluster.name}.yaml` });
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
  const remove = () =>
    act(async () => {
      await call(session, v4(session, `clusters/${clusterId}`), { method: "DELETE" });
      location.hash = "#/clusters";
    });

  return (
    <section aria-labelledby="cluster-title">
      <div class="title-row">
        <h1 id="cluster-title">Cluster {cluster.name}</h1>
        <a href={`#/webcli/${clusterId}`}>Web CLI</a>
      </div>
      <dl class="facts">
        <dt>Status</dt>
        <dd data-testid="cluster-status">
          <StatusBadge value={cluster.status} />
        </dd>
        <dt>Masters</dt>
        <dd>
          {cluster.numMasters} <StatusBadge value={cluster.masterStatus} />
        </dd>
        <dt>Workers</dt>
        <dd>
          {cluster.numWorkers} <StatusBadge value={cluster.workerStatus} />
        </dd>
        <dt>Version</dt>
        <dd>{cluster.kubeRoleVersion}</dd>
        <dt>Last operation</dt>
        <dd data-testid="cluster-task">
          {cluster.lastOp || "—"} <StatusBadge value={cluster.taskStatus} />
          {cluster.taskError ? <span class="error"> {cluster.taskError}</span> : null}
        </dd>
        <dt>Last ok</dt>
        <dd>{when(cluster.lastOk)}</dd>
      </dl>
      <div class="actions">
        <label class="check">
          <input type="checkbox" checked={certAuth} onChange={(e) => setCertAuth(e.currentTarget.checked)} />{" "}
          Certificate instead of token
        </label>
        <button type="button" onClick={download}>
          Download kubeconfig
        </button>
        <button type="button" class="secondary" onClick={() => setEditing(!editing)} aria-expanded={editing}>
          Edit
        </button>
        <button type="button" class="danger" onClick={() => setDeleting(true)}>
          Delete
        </button>
      </div>
      {deleting ? (
        <div class="panel confirm" role="alertdialog" aria-labelledby="delete-q">
          <p id="delete-q">
            Delete cluster {cluster.name}? Its nodes are detached and cleaned first. This cannot be undone.
          </p>
          <button type="button" class="danger" onClick={remove}>
            Yes, delete {cluster.name}
          </button>
          <button type="button" class="secondary" onClick={() => setDeleting(false)}>
            Keep it
          </button>
        </div>
      ) : null}
      {editing ? (
        <section class="panel" aria-label="Edit cluster">
          <ClusterForm
            mode="update"
            initial={cluster as unknown as Record<string, unknown>}
            submit={async (body) => {
              await call(session, v4(session, `clusters/${clusterId}`), { method: "PUT", body });
              setEditing(false);
              data.reload();
            }}
            onCancel={() => setEditing(false)}
          />
        </section>
      ) : null}
      <ErrorNote error={actionError} />
      <ErrorNote error={streamLost} />

      <h2>Nodes</h2>
      {nodes.length === 0 ? <p>No nodes attached.</p> : null}
      <ul class="nodes" aria-label="Nodes">
        {nodes.map((n) => {
          const host = hostOf(n.uuid);
          return (
            <li key={n.uuid} class="node" data-node={n.name}>
              <div class="node-head">
                <strong>{n.name}</strong> <span>{n.isMaster === 1 ? "master" : "worker"}</span>{" "}
                <StatusBadge value={n.status} /> <span>agent {n.agentConnected ? "connected" : "disconnected"}</span>{" "}
                <span>
                  {cluster.kubeRoleVersion} · agent {host?.host_agent.version ?? "?"}
                </span>{" "}
                <button type="button" class="secondary" onClick={() => detach(n)}>
                  Detach {n.name}
                </button>
              </div>
              <PhaseTimeline node={n.name} phases={(host?.phases ?? []) as Phase[]} />
            </li>
          );
        })}
      </ul>

      <section class="panel" aria-labelledby="attach-title">
        <h2 id="attach-title">Attach hosts</h2>
        {free.length === 0 ? <p>No connected host is free.</p> : null}
        {free.map((h) => (
          <div key={h.id} class="field inline">
            <label for={`attach-${h.id}`}>{h.info.hostname}</label>
            <select
              id={`attach-${h.id}`}
              value={attachRoles[h.id] ?? ""}
              onChange={(e) => setAttachRoles({ ...attachRoles, [h.id]: e.currentTarget.value as "master" })}
            >
              <option value="">not attached</option>
              <option value="master">as master</option>
              <option value="worker">as worker</option>
            </select>
          </div>
        ))}
        {free.length ? (
          <button type="button" onClick={attach} disabled={!Object.values(attachRoles).some(Boolean)}>
            Attach
          </button>
        ) : null}
      </section>

      <RolloutForm
        session={session}
        clusterId={clusterId}
        nodes={nodes}
        targets={{ patch: v3cluster.patchUpgradeRoleVersion, minor: v3cluster.minorUpgradeRoleVersion }}
        onStarted={data.reload}
      />

      <section aria-labelledby="live-title">
        <h2 id="live-title">Live progress</h2>
        <ol class="log" aria-live="polite" aria-label="Live progress of this cluster">
          {log.map((l, i) => (
            <li key={i}>
              <time>{l.at}</time> {l.text}
            </li>
          ))}
        </ol>
      </section>
    </section>
  );
}
