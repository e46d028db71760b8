/**
 * Writes asked for within one short window become one statement: a rollout batch that sends a
 * thousand commands at once inserts them in one INSERT rather than a thousand (the rollouts'
 * statements per node are bounded: test/rollout-statements.test.ts). `run` gets the items in
 * arrival order and answers one value per item, in the same order; a failure rejects every
 * item of that batch.
 */
export class StatementBatch<T, R> {
  private queue: { item: T; resolve: (value: R) => void; reject: (err: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly run: (items: T[]) => Promise<R[]>,
    /** How long the first item of a batch waits for others. */
    private readonly windowMs = 2,
    /** The most items of one statement (PostgreSQL takes at most 65,535 parameters). */
    private readonly maxItems = 500,
  ) {}

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.queue.length >= this.maxItems) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.windowMs);
    });
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    this.run(batch.map((b) => b.item)).then(
      (results) => {
        for (const [i, b] of batch.entries()) b.resolve(results[i] as R);
      },
      (err: unknown) => {
        for (const b of batch) b.reject(err);
      },
    );
  }
}
