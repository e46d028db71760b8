import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Serialises the statements on SQLite's one connection around asynchronous transactions.
 *
 * better-sqlite3 runs each statement synchronously, but a transaction written with `await`
 * spans several turns of the event loop; between two of its statements another request's
 * statement could run on the same connection, inside this transaction's BEGIN, and be committed
 * or rolled back with it. The gate stops that: a transaction holds the gate from BEGIN to
 * COMMIT; its own statements (recognised by the async context they run in) pass; every other
 * statement, and every other transaction, waits its turn in arrival order.
 */
export class StatementGate {
  private readonly context = new AsyncLocalStorage<symbol>();
  /** The transaction holding the gate. */
  private owner: symbol | undefined;
  /** Resolves when the last queued holder has let go; holders chain on it in arrival order. */
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  /** Runs `fn` as the only holder of the gate: a transaction and the statements it issues. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    const id = Symbol("transaction");
    this.owner = id;
    try {
      return await this.context.run(id, fn);
    } finally {
      this.owner = undefined;
      release();
    }
  }

  /** Runs one statement: at once inside the open transaction or when the gate is free, else in turn. */
  async statement<T>(run: () => T): Promise<T> {
    if (this.owner !== undefined && this.context.getStore() === this.owner) return run();
    if (this.owner === undefined && this.waiting === 0) return run();
    const release = await this.acquire();
    try {
      return run();
    } finally {
      release();
    }
  }

  private acquire(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.tail;
    this.tail = previous.then(() => held);
    this.waiting += 1;
    return previous.then(() => {
      this.waiting -= 1;
      return release;
    });
  }
}
