import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api.ts";

/**
 * When a page's events stream gave up reconnecting (events.ts): the failure, for an ErrorNote,
 * and the `onGiveUp` to hand to followEvents.
 */
export function useStreamLoss(): [Error | null, (error: Error) => void] {
  const [lost, setLost] = useState<Error | null>(null);
  const onGiveUp = (error: Error) =>
    setLost(new Error(`Live updates stopped: ${error.message}. Reload the page to follow again.`));
  return [lost, onGiveUp];
}

/** A failure said in words, announced to screen readers as it appears. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const text =
    error instanceof ApiError
      ? `${error.message} (${error.code}${error.field ? `, field ${error.field}` : ""})`
      : String((error as Error).message ?? error);
  return (
    <p class="error" role="alert">
      {text}
    </p>
  );
}

/** A labelled input; the API's 400 for this field is shown beside it and tied to it for screen readers. */
export function Field(props: {
  id: string;
  label: string;
  hint?: string;
  error?: string | undefined;
  children: ComponentChildren;
}) {
  const described = [props.hint ? `${props.id}-hint` : "", props.error ? `${props.id}-error` : ""].join(" ").trim();
  return (
    <div class="field" data-described={described || undefined}>
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint ? (
        <small id={`${props.id}-hint`} class="hint">
          {props.hint}
        </small>
      ) : null}
      {props.error ? (
        <small id={`${props.id}-error`} class="field-error" role="alert">
          {props.error}
        </small>
      ) : null}
    </div>
  );
}

/** Loads on mount and whenever `reload()` is called; keeps the last good value while reloading. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (v) => {
        if (!live) return;
        setValue(v);
        setError(null);
      },
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { value, error, reload: () => setTick((t) => t + 1), set: setValue };
}

export function StatusBadge({ value }: { value: string | null | undefined }) {
  const v = value || "—";
  const tone = /^(ok|healthy|running|success|succeeded|true)$/.test(v)
    ? "good"
    : /fail|error|unhealthy/.test(v)
      ? "bad"
      : "busy";
  return <span class={`badge ${tone}`}>{v}</span>;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : "—";
}
