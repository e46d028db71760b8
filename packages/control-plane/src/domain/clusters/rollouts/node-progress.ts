import type { StepContext } from "../../../runner/types.ts";

function ids(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/**
 * A rollout step's progress, kept in the operation's cursor across control-plane restarts.
 * `started` is saved at once, before any command of a batch is sent; `done` at most every
 * 250 ms and at the end of each batch. A done node not yet saved is only waited for again
 * after a crash (it is started), so throttling it never makes a node restart twice.
 *
 * Before a save names nodes in `done` for the first time, `recordDone` writes what their being
 * done means (an upgrade: their version), one statement for all of them: a crash in between
 * leaves them started with the new version recorded, never done with the old one.
 */
export class NodeProgress {
  readonly started: Set<string>;
  readonly done: Set<string>;
  /** Done since the last save. */
  private fresh: string[] = [];
  private last = 0;
  /** Saves run in the background, each after the one before (the one row, in order). */
  private saving: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: StepContext,
    private readonly recordDone?: (nodeIds: string[]) => Promise<void>,
  ) {
    this.started = new Set(ids(ctx.progress.started));
    this.done = new Set(ids(ctx.progress.done));
  }

  start(nodeIds: string[]): void {
    for (const id of nodeIds) this.started.add(id);
    this.save();
  }

  finish(id: string): void {
    this.done.add(id);
    this.fresh.push(id);
    if (Date.now() - this.last >= 250) this.save();
  }

  /** Saves what is not saved yet, and waits until every save so far is written. */
  async flush(): Promise<void> {
    if (this.fresh.length > 0) this.save();
    await this.saving;
  }

  private save(): void {
    this.last = Date.now();
    const fresh = this.fresh;
    this.fresh = [];
    const progress = { started: [...this.started], done: [...this.done] };
    // A failed save fails every later one: `done` is never saved past a record that was not written.
    const saving = this.saving.then(async () => {
      if (fresh.length > 0) await this.recordDone?.(fresh);
      await this.ctx.saveProgress(progress);
    });
    // Handled here so a failure in the background is not an unhandled rejection; flush() still throws it.
    saving.catch(() => undefined);
    this.saving = saving;
  }
}
