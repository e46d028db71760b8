import { duration, StatusBadge } from "../ui.tsx";

export interface Phase {
  id: string;
  name: string;
  order: number;
  state: string;
  lastError: string | null;
  message?: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
}

/** A node's phases in order, as an ordered list: state, how long it took, the last error. */
export function PhaseTimeline({ node, phases }: { node: string; phases: Phase[] }) {
  if (!phases.length) return <p class="muted">No phase report yet.</p>;
  const done = phases.filter((p) => p.state === "running").length;
  return (
    <details class="phases">
      <summary>
        Phases of {node}: {done} of {phases.length} running
        {phases.some((p) => p.state === "failed") ? ", some failed" : ""}
      </summary>
      <ol aria-label={`Phases of ${node}`}>
        {[...phases]
          .sort((a, b) => a.order - b.order)
          .map((p) => (
            <li key={p.id} class={`phase ${p.state}`} data-phase={p.id} data-state={p.state}>
              <span class="phase-name">{p.name}</span>
              <StatusBadge value={p.state} />
              <span class="phase-time">{duration(p.durationMs)}</span>
              {p.lastError ? <span class="phase-error">Last error: {p.lastError}</span> : null}
              {!p.lastError && p.message ? <span class="muted">{p.message}</span> : null}
            </li>
          ))}
      </ol>
    </details>
  );
}
