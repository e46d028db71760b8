import { useState } from "preact/hooks";
import { call, v4 } from "../api.ts";
import type { LiveEvent } from "../events.ts";
import type { Session } from "../session.ts";
import { ErrorNote, Field, StatusBadge } from "../ui.tsx";
import type { Host } from "./hosts.tsx";

/** A started host-agent rollout as the page follows it (README "Host-agent upgrades"). */
export interface AgentRun {
  operationId: string;
  version: string;
  batches: string[][];
  /** Batches finished: the operation's steps are its batches, one `operation.step` each. */
  batchesDone: number;
  state: string;
  error: string | null;
}

interface OperationRecord {
  state: string;
  step: number;
  error: string | null;
}

/** The run after one event of the project's stream; events of other operations leave it as it is. */
export function advance(run: AgentRun | null, e: LiveEvent): AgentRun | null {
  if (!run || e.data.operationId !== run.operationId) return run;
  const state = String(e.data.state);
  if (e.name === "operation.step" && !e.data.batch) {
    return {
      ...run,
      state,
      batchesDone: Math.max(run.batchesDone, Number(/^batch-(\d+)$/.exec(String(e.data.step))?.[1] ?? 0)),
    };
  }
  if (e.name === "operation.finished") return { ...run, state, error: (e.data.error as string | null) ?? null };
  return { ...run, state };
}

/** Merges the stored operation (read after the start and after the stream lost events). */
function merge(run: AgentRun, op: OperationRecord): AgentRun {
  const finished = op.state === "succeeded" || op.state === "failed";
  return {
    ...run,
    batchesDone: Math.max(run.batchesDone, op.step),
    state: finished || run.state === "pending" ? op.state : run.state,
    error: op.error ?? run.error,
  };
}

const runsAt = (h: Host, version: string) =>
  h.info.responding && h.host_agent.version === version && h.host_agent.status === "running";

/** Where one host of the run is: its batch done or not, and what its agent says. */
function hostProgress(run: AgentRun, host: Host | undefined, batch: number): string {
  // A batch's step ends only once each of its hosts is back running at the version, so a done
  // batch says so even before the host list has caught up.
  const doneBatch = batch < run.batchesDone || run.state === "succeeded";
  if (doneBatch || (host && runsAt(host, run.version))) return `done, agent ${run.version} running`;
  if (run.state === "failed") return "not upgraded";
  if (batch > run.batchesDone) return "waiting";
  if (!host?.info.responding) return "upgrading: agent reconnecting";
  return host.host_agent.status === "updating" ? "upgrading: agent installing" : "upgrading";
}

/**
 * Host-agent upgrades of the hosts chosen in the table: the control plane's plan first
 * (`POST .../hostAgentUpgrades/plan`, the request's own checks, nothing recorded), then the
 * rollout once confirmed, then each host's progress as its batch goes.
 */
export function AgentUpgradeForm(props: {
  session: Session;
  hosts: Host[];
  chosen: string[];
  run: AgentRun | null;
  setRun: (update: (run: AgentRun | null) => AgentRun | null) => void;
  onStarted: () => void;
}) {
  const { session, hosts } = props;
  const [version, setVersion] = useState("");
  const [batchSize, setBatchSize] = useState("");
  const [plan, setPlan] = useState<{ key: string; batches: string[][] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const body = () => ({
    version: version.trim(),
    hosts: props.chosen,
    ...(batchSize.trim() ? { batchSize: Number(batchSize.trim()) } : {}),
  });
  // A plan holds only for the request it was made for.
  const key = JSON.stringify(body());
  const shown = plan?.key === key ? plan.batches : null;
  const nameOf = (id: string) => hosts.find((h) => h.id === id)?.info.hostname ?? id;
  const showPlan = async (event: SubmitEvent) => {
    event.preventDefault();
    setError(null);
    try {
      const answer = await call<{ batches: string[][] }>(session, v4(session, "hostAgentUpgrades/plan"), {
        method: "POST",
        body: body(),
      });
      setPlan({ key, batches: answer.batches });
    } catch (err) {
      setError(err);
    }
  };
  const start = async () => {
    setError(null);
    try {
      const answer = await call<{ operationId: string; batches: string[][] }>(
        session,
        v4(session, "hostAgentUpgrades"),
        { method: "POST", body: body() },
      );
      const run: AgentRun = { ...answer, version: version.trim(), batchesDone: 0, state: "pending", error: null };
      props.setRun(() => run);
      setPlan(null);
      props.onStarted();
      // Events of the operation may have come before its id did.
      const op = await call<OperationRecord>(session, `/v1/operations/${answer.operationId}`);
      props.setRun((r) => (r?.operationId === run.operationId ? merge(r, op) : r));
    } catch (err) {
      setError(err);
    }
  };
  const run = props.run;
  return (
    <form class="panel" onSubmit={showPlan} aria-labelledby="upgrade-title">
      <h2 id="upgrade-title">Upgrade host agents</h2>
      <p>{props.chosen.length} hosts chosen in the table.</p>
      <div class="grid">
        <Field id="agent-version" label="Agent version" hint="A package stored on this control plane">
          <input id="agent-version" required value={version} onInput={(e) => setVersion(e.currentTarget.value)} />
        </Field>
        <Field id="agent-batch" label="Hosts per batch" hint="Default 1">
          <input
            id="agent-batch"
            inputMode="numeric"
            value={batchSize}
            onInput={(e) => setBatchSize(e.currentTarget.value)}
          />
        </Field>
      </div>
      <button type="submit" disabled={!props.chosen.length}>
        Show the agent plan
      </button>
      {shown ? (
        <div class="plan" aria-live="polite">
          <h3>Plan: {shown.length} batches</h3>
          <ol aria-label="Agent upgrade plan">
            {shown.map((batch, i) => (
              <li key={batch.join()}>
                Batch {i + 1}:{" "}
                {batch
                  .map((id) => {
                    const host = hosts.find((h) => h.id === id);
                    return host && runsAt(host, version.trim())
                      ? `${nameOf(id)} (at ${version.trim()} already)`
                      : nameOf(id);
                  })
                  .join(", ")}
              </li>
            ))}
          </ol>
          <button type="button" onClick={start}>
            Start agent upgrade
          </button>
        </div>
      ) : null}
      <ErrorNote error={error} />
      {run ? (
        <div class="plan">
          <h3>
            Agent upgrade to {run.version}: <StatusBadge value={run.state} />
          </h3>
          <p role="status">
            Operation {run.operationId}: {run.batchesDone} of {run.batches.length} batches done
            {run.error ? `; ${run.error}` : ""}
          </p>
          <ul aria-label="Agent upgrade progress">
            {run.batches.flatMap((batch, i) =>
              batch.map((id) => (
                <li key={id} data-host={nameOf(id)}>
                  {nameOf(id)}: batch {i + 1} of {run.batches.length}:{" "}
                  {hostProgress(
                    run,
                    hosts.find((h) => h.id === id),
                    i,
                  )}
                </li>
              )),
            )}
          </ul>
        </div>
      ) : null}
    </form>
  );
}

/** After the event stream lost events (`events.lost`: past the retention): the stored operation. */
export async function resync(session: Session, run: AgentRun): Promise<(r: AgentRun | null) => AgentRun | null> {
  const op = await call<OperationRecord>(session, `/v1/operations/${run.operationId}`);
  return (r) => (r?.operationId === run.operationId ? merge(r, op) : r);
}
