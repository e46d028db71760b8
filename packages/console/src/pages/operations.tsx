import { useEffect } from "preact/hooks";
import { call, v4 } from "../api.ts";
import { followEvents } from "../events.ts";
import type { Session } from "../session.ts";
import { ErrorNote, StatusBadge, useLoad, useStreamLoss, when } from "../ui.tsx";

interface Operation {
  uuid: string;
  kind: string;
  targetType: string;
  targetUuid: string;
  state: string;
  step: number;
  error: string | null;
  createdAt: string;
  finishedAt: string | null;
}

/** The project's operations, newest first; each event of an operation re-reads the list. */
export function OperationsPage({ session }: { session: Session }) {
  const ops = useLoad(
    () => call<Operation[]>(session, v4(session, "operations"), { query: { limit: 200 } }),
    [session.token],
  );
  const [streamLost, onGiveUp] = useStreamLoss();
  useEffect(
    () => followEvents(session, (e) => e.name.startsWith("operation.") && ops.reload(), ops.reload, { onGiveUp }),
    [session.token],
  );
  const list = [...(ops.value ?? [])].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  return (
    <section aria-labelledby="ops-title">
      <h1 id="ops-title">Operations</h1>
      <ErrorNote error={ops.error} />
      <ErrorNote error={streamLost} />
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Operations of project {session.projectName}</caption>
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col">Target</th>
              <th scope="col">State</th>
              <th scope="col">Steps done</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
              <th scope="col">Error</th>
            </tr>
          </thead>
          <tbody>
            {list.map((o) => (
              <tr key={o.uuid}>
                <th scope="row">{o.kind}</th>
                <td>
                  {o.targetType === "cluster" ? (
                    <a href={`#/cluster/${o.targetUuid}`}>{o.targetUuid.slice(0, 8)}</a>
                  ) : (
                    o.targetUuid.slice(0, 8)
                  )}
                </td>
                <td>
                  <StatusBadge value={o.state} />
                </td>
                <td>{o.step}</td>
                <td>{when(o.createdAt)}</td>
                <td>{when(o.finishedAt)}</td>
                <td class="error">{o.error ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
