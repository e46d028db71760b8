import { useEffect, useState } from "preact/hooks";
import { call, v4 } from "../api.ts";
import { followEvents } from "../events.ts";
import type { Session } from "../session.ts";
import { ErrorNote, StatusBadge, useLoad, useStreamLoss } from "../ui.tsx";
import { ClusterForm } from "./cluster-form.tsx";

export interface Cluster {
  uuid: string;
  name: string;
  status: string;
  taskStatus: string;
  taskError: string;
  masterStatus: string;
  workerStatus: string;
  kubeRoleVersion: string;
  numMasters: number;
  numWorkers: number;
  lastOp: string;
  lastOk: string;
}

/** Every cluster of the project, kept current by the event stream (an operation that ends re-reads the list). */
export function ClustersPage({ session }: { session: Session }) {
  const clusters = useLoad(() => call<Cluster[]>(session, v4(session, "clusters")), [session.token]);
  const [creating, setCreating] = useState(false);
  const [streamLost, onGiveUp] = useStreamLoss();
  useEffect(
    () =>
      followEvents(
        session,
        (e) => {
          if (e.name === "operation.finished" || e.name === "operation.started") clusters.reload();
        },
        clusters.reload,
        { onGiveUp },
      ),
    [session.token],
  );
  const create = async (body: Record<string, unknown>) => {
    const created = await call<{ uuid: string }>(session, v4(session, "clusters"), { method: "POST", body });
    setCreating(false);
    location.hash = `#/cluster/${created.uuid}`;
  };
  const list = clusters.value ?? [];
  return (
    <section aria-labelledby="clusters-title">
      <div class="title-row">
        <h1 id="clusters-title">Clusters</h1>
        {creating ? null : (
          <button type="button" onClick={() => setCreating(true)}>
            New cluster
          </button>
        )}
      </div>
      {creating ? (
        <section aria-label="New cluster" class="panel">
          <h2>New cluster</h2>
          <ClusterForm mode="create" submit={create} onCancel={() => setCreating(false)} />
        </section>
      ) : null}
      <ErrorNote error={clusters.error} />
      <ErrorNote error={streamLost} />
      {clusters.value && list.length === 0 ? <p>No clusters yet.</p> : null}
      {list.length ? (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Clusters of project {session.projectName}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Masters</th>
                <th scope="col">Workers</th>
                <th scope="col">Version</th>
                <th scope="col">Last operation</th>
              </tr>
            </thead>
            <tbody>
              {list.map((c) => (
                <tr key={c.uuid}>
                  <th scope="row">
                    <a href={`#/cluster/${c.uuid}`}>{c.name}</a>
                  </th>
                  <td>
                    <StatusBadge value={c.status} />
                  </td>
                  <td>
                    {c.numMasters} <StatusBadge value={c.masterStatus} />
                  </td>
                  <td>
                    {c.numWorkers} <StatusBadge value={c.workerStatus} />
                  </td>
                  <td>{c.kubeRoleVersion}</td>
                  <td>
                    {c.lastOp || "—"} {c.taskStatus ? <StatusBadge value={c.taskStatus} /> : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
