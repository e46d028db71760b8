/**
 * Writes that arrive together become one statement: a rollout batch sends a hundred commands and
 * gets two hundred node reports within a few milliseconds, and one INSERT or UPDATE for them
 * costs a round trip and a query build instead of a hundred (the rollouts' statements per node
 * are bounded: control-plane test/rollout-statements.test.ts).
 *
 * A statement starts at the end of the event-loop turn of its first item, so the rest of that
 * turn (other links' frames, the other commands of a batch) joins it; items that arrive while it
 * runs wait for it and go together in the next one. No timer: an item alone waits only for its
 * turn to end. `run` gets the items in arrival order and answers one value per item, in the same
 * order; a failure rejects every item of that statement.
 */
export interface StatementBatchOptions<T> {
  /** The most items of one statement (PostgreSQL takes at most 65,535 parameters). */
  maxItems?: number;
  /**
   * Items with the same key go in separate statements, in arrival order (an UPDATE … FROM with
   * two source rows for one target row may apply either).
   */
  keyOf?: (item: T) => string;
}

interface Queued<T, R> {
  item: T;
  resolve(value: R): void;
  reject(err: unknown): void;
}

export class StatementBatch<T, R> {
  private queue: Queued<T, R>[] = [];
  private running = false;
  private readonly maxItems: number;

  constructor(
    private readonly run: (items: T[]) => Promise<R[]>,
    private readonly options: StatementBatchOptions<T> = {},
  ) {
    this.maxItems = options.maxItems ?? 500;
  }

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.running) return;
      this.running = true;
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.take();
      try {
        const results = await this.run(batch.map((b) => b.item));
        for (const [i, b] of batch.entries()) b.resolve(results[i] as R);
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    this.running = false;
  }

  /** The oldest items, at most maxItems and one per key; the rest stay queued in order. */
  private take(): Queued<T, R>[] {
    const { keyOf } = this.options;
    if (!keyOf) return this.queue.splice(0, this.maxItems);
    const batch: Queued<T, R>[] = [];
    const rest: Queued<T, R>[] = [];
    const keys = new Set<string>();
    for (const queued of this.queue) {
      const key = keyOf(queued.item);
      if (batch.length < this.maxItems && !keys.has(key)) {
        keys.add(key);
        batch.push(queued);
      } else rest.push(queued);
    }
    this.queue = rest;
    return batch;
  }
}
