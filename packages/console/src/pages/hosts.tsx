import { useEffect, useRef, useState } from "preact/hooks";
import { call } from "../api.ts";
import { followEvents } from "../events.ts";
import type { Session } from "../session.ts";
import { ErrorNote, Field, StatusBadge, useLoad, useStreamLoss } from "../ui.tsx";
import { type AgentRun, AgentUpgradeForm, advance, resync } from "./agent-upgrade.tsx";

export interface Host {
  id: string;
  info: { hostname: string; responding: boolean; last_response_time: string | null };
  message: string;
  host_agent: { version: string; status: string; error?: string };
  extensions: { interfaces: { data: { primary_ip: string } } };
  nodeStatus: string;
  clusterUuid: string | null;
  phases: unknown[];
}

interface IssuedJoinToken {
  token: string;
  expiresAt: string;
  installCommand: string | null;
}

/** Every host with its agent; join tokens for new hosts; host-agent upgrades in batches. */
export function HostsPage({ session }: { session: Session }) {
  const hosts = useLoad(() => call<Host[]>(session, "/v1/hosts"), [session.token]);
  const [issued, setIssued] = useState<IssuedJoinToken | null>(null);
  const [chosen, setChosen] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [run, setRun] = useState<AgentRun | null>(null);
  // The run as of now for the reconnect handler, which outlives renders.
  const current = useRef(run);
  current.current = run;
  const [streamLost, onGiveUp] = useStreamLoss();
  useEffect(
    () =>
      followEvents(
        session,
        (e) => {
          if (e.name.startsWith("node.connected") || e.name.startsWith("node.disconnected") || e.name === "node.agent")
            hosts.reload();
          if (e.name.startsWith("operation.")) setRun((r) => advance(r, e));
        },
        () => {
          hosts.reload();
          const r = current.current;
          if (r) resync(session, r).then(setRun, setError);
        },
        { onGiveUp },
      ),
    [session.token],
  );
  const issue = async () => {
    setError(null);
    try {
      setIssued(
        await call<IssuedJoinToken>(session, `/v1/projects/${session.projectId}/joinTokens`, {
          method: "POST",
          body: {},
        }),
      );
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="hosts-title">
      <h1 id="hosts-title">Hosts</h1>
      <ErrorNote error={hosts.error} />
      <ErrorNote error={streamLost} />
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Hosts and their agents</caption>
          <thead>
            <tr>
              <th scope="col">Upgrade</th>
              <th scope="col">Host</th>
              <th scope="col">Address</th>
              <th scope="col">Agent</th>
              <th scope="col">Agent status</th>
              <th scope="col">Node</th>
              <th scope="col">Cluster</th>
            </tr>
          </thead>
          <tbody>
            {(hosts.value ?? []).map((h) => (
              <tr key={h.id}>
                <td>
                  <input
                    type="checkbox"
                    aria-label={`Upgrade the agent of ${h.info.hostname}`}
                    checked={chosen.includes(h.id)}
                    onChange={(e) => {
                      const on = e.currentTarget.checked;
                      setChosen((c) => (on ? [...c, h.id] : c.filter((id) => id !== h.id)));
                    }}
                  />
                </td>
                <th scope="row">{h.info.hostname}</th>
                <td>{h.extensions.interfaces.data.primary_ip}</td>
                <td>{h.host_agent.version}</td>
                <td>
                  <StatusBadge value={h.info.responding ? h.host_agent.status : "offline"} />
                  {h.message ? <span class="error"> {h.message}</span> : null}
                </td>
                <td>
                  <StatusBadge value={h.nodeStatus} />
                </td>
                <td>{h.clusterUuid ? <a href={`#/cluster/${h.clusterUuid}`}>open</a> : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <section class="panel" aria-labelledby="join-title">
        <h2 id="join-title">Add a host</h2>
        <p>A join token registers one agent once. Run the command as root on the new host.</p>
        <button type="button" onClick={issue}>
          Create a join token
        </button>
        {issued ? (
          <div>
            <Field
              id="install-command"
              label="Install command"
              hint={`The token expires ${new Date(issued.expiresAt).toLocaleString()}`}
            >
              <textarea id="install-command" readOnly rows={4} value={issued.installCommand ?? issued.token} />
            </Field>
            {issued.installCommand ? null : (
              <p class="muted">This server names no URL a host can verify; start the agent with the token above.</p>
            )}
          </div>
        ) : null}
      </section>
      <AgentUpgradeForm
        session={session}
        hosts={hosts.value ?? []}
        chosen={chosen}
        run={run}
        setRun={setRun}
        onStarted={() => setChosen([])}
      />
      <ErrorNote error={error} />
    </section>
  );
}
