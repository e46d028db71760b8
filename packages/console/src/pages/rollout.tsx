import type { NodeRecordV4 } from "@keelson/protocol/api-records";
import { useState } from "preact/hooks";
import { call, v3, v4 } from "../api.ts";
import type { Session } from "../session.ts";
import { ErrorNote, Field } from "../ui.tsx";

/** A node of `GET /v4/{project}/clusters/{uuid}/nodes`: the server's own record type. */
export type ClusterNode = NodeRecordV4;

/**
 * The order the control plane will go in (README "Rolling restarts and upgrades"): masters one at a
 * time, then (upgrade) the chosen workers together, then the other workers in batches of `percent`
 * of all the workers, rounded down and at least one.
 */
export function rolloutPlan(
  nodes: ClusterNode[],
  scope: "all" | "masters" | "workers",
  percent: number,
  chosen: string[] = [],
): string[][] {
  // The rollout takes nodes by name, then id (domain/clusters/rollouts/rollout.ts).
  const sorted = [...nodes].sort((a, b) => a.name.localeCompare(b.name) || a.uuid.localeCompare(b.uuid));
  const masters = sorted.filter((n) => n.isMaster === 1);
  const workers = sorted.filter((n) => n.isMaster !== 1);
  const plan: string[][] = [];
  if (scope !== "workers") for (const m of masters) plan.push([m.name]);
  if (scope === "masters") return plan;
  const first = workers.filter((w) => chosen.includes(w.uuid));
  if (first.length) plan.push(first.map((w) => w.name));
  const rest = workers.filter((w) => !chosen.includes(w.uuid));
  const size = Math.max(1, Math.floor((workers.length * percent) / 100));
  for (let i = 0; i < rest.length; i += size) plan.push(rest.slice(i, i + size).map((w) => w.name));
  return plan;
}

const SCOPE_PATH = { all: "restart", masters: "restartMasters", workers: "restartWorkers" } as const;

/** Restart or upgrade: the form, then the plan to confirm, then the request. */
export function RolloutForm(props: {
  session: Session;
  clusterId: string;
  nodes: ClusterNode[];
  targets: { patch?: string; minor?: string };
  onStarted: () => void;
}) {
  const [kind, setKind] = useState<"restart" | "upgrade">("restart");
  const [scope, setScope] = useState<"all" | "masters" | "workers">("all");
  const [type, setType] = useState<"patch" | "minor">(props.targets.patch ? "patch" : "minor");
  const [percent, setPercent] = useState(10);
  const [chosen, setChosen] = useState<string[]>([]);
  const [plan, setPlan] = useState<string[][] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const workers = props.nodes.filter((n) => n.isMaster !== 1);
  const start = async () => {
    setError(null);
    try {
      if (kind === "restart") {
        await call(props.session, v3(props.session, `clusters/${props.clusterId}/${SCOPE_PATH[scope]}`), {
          method: "POST",
          query: { batchPercent: percent },
        });
      } else {
        await call(props.session, v4(props.session, `clusters/${props.clusterId}/upgrade`), {
          method: "POST",
          query: { type },
          body: { batchUpgradePercent: percent, ...(chosen.length ? { batchUpgradeNodes: chosen } : {}) },
        });
      }
      setPlan(null);
      props.onStarted();
    } catch (err) {
      setError(err);
    }
  };
  const target = kind === "upgrade" ? props.targets[type] : undefined;
  return (
    <form
      class="panel"
      aria-label="Restart or upgrade"
      onSubmit={(e) => {
        e.preventDefault();
        setPlan(
          rolloutPlan(props.nodes, kind === "upgrade" ? "all" : scope, percent, kind === "upgrade" ? chosen : []),
        );
      }}
    >
      <h2>Restart or upgrade</h2>
      <div class="grid">
        <Field id="ro-kind" label="Action">
          <select
            id="ro-kind"
            value={kind}
            onChange={(e) => {
              setKind(e.currentTarget.value as "restart");
              setPlan(null);
            }}
          >
            <option value="restart">Restart</option>
            <option value="upgrade">Upgrade</option>
          </select>
        </Field>
        {kind === "restart" ? (
          <Field id="ro-scope" label="Nodes">
            <select
              id="ro-scope"
              value={scope}
              onChange={(e) => {
                setScope(e.currentTarget.value as "all");
                setPlan(null);
              }}
            >
              <option value="all">All (masters, then workers)</option>
              <option value="masters">Masters</option>
              <option value="workers">Workers</option>
            </select>
          </Field>
        ) : (
          <Field id="ro-type" label="Upgrade to" hint={target ? `Target ${target}` : "No such target for this cluster"}>
            <select
              id="ro-type"
              value={type}
              onChange={(e) => {
                setType(e.currentTarget.value as "patch");
                setPlan(null);
              }}
            >
              <option value="patch">Patch</option>
              <option value="minor">Minor</option>
            </select>
          </Field>
        )}
        <Field id="ro-percent" label="Batch percent of workers (1-100)">
          <input
            id="ro-percent"
            type="number"
            min={1}
            max={100}
            value={percent}
            onInput={(e) => {
              setPercent(Number(e.currentTarget.value));
              setPlan(null);
            }}
          />
        </Field>
      </div>
      {kind === "upgrade" && workers.length ? (
        <fieldset>
          <legend>Workers upgraded together first (optional)</legend>
          {workers.map((w) => (
            <label key={w.uuid} class="check">
              <input
                type="checkbox"
                checked={chosen.includes(w.uuid)}
                onChange={(e) => {
                  const on = e.currentTarget.checked;
                  setChosen((c) => (on ? [...c, w.uuid] : c.filter((id) => id !== w.uuid)));
                  setPlan(null);
                }}
              />{" "}
              {w.name}
            </label>
          ))}
        </fieldset>
      ) : null}
      <button type="submit">Show the plan</button>
      {plan ? (
        <div class="plan" aria-live="polite">
          <h3>Plan: {plan.length} steps</h3>
          <ol aria-label="Rollout plan">
            {plan.map((step, i) => (
              <li key={step.join()}>
                Step {i + 1}: {step.join(", ")}
              </li>
            ))}
          </ol>
          <button type="button" onClick={start}>
            Start {kind}
          </button>
        </div>
      ) : null}
      <ErrorNote error={error} />
    </form>
  );
}
