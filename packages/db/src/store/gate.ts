import { AsyncLocalStorage } from "node:async_hooks";

/** How long statements may run in one turn of the event loop before it is let turn. */
const SLICE_MS = 1;

/**
 * Serialises the statements on SQLite's one connection around asynchronous transactions.
 *
 * better-sqlite3 runs each statement synchronously, but a transaction written with `await`
 * spans several turns of the event loop; between two of its statements another request's
 * statement could run on the same connection, inside this transaction's BEGIN, and be committed
 * or rolled back with it. The gate stops that: a transaction holds the gate from BEGIN to
 * COMMIT; its own statements (recognised by the async context they run in) pass; every other
 * statement, and every other transaction, waits its turn in arrival order.
 *
 * It also keeps a run of statements from holding the event loop. A chain of awaited statements
 * on SQLite never leaves the microtask queue (each resolves at once), so a background operation
 * of a dozen statements ran whole before the next HTTP request or agent frame was even read:
 * the read sent right after a write waited for the write's operation. Once statements have run
 * for SLICE_MS without the loop turning, the next one first lets it turn (setImmediate).
 */
export class StatementGate {
  private readonly context = new AsyncLocalStorage<symbol>();
  /** The transaction holding the gate. */
  private owner: symbol | undefined;
  /** Resolves when the last queued holder has let go; holders chain on it in arrival order. */
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  /** When this turn of the event loop ran its first statement; -1 until it has. */
  private sliceStart = -1;
  private readonly endSlice = (): void => {
    this.sliceStart = -1;
  };

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Whether this turn's statements have had their slice (opening one at its first statement). */
  private sliceSpent(): boolean {
    const now = performance.now();
    if (this.sliceStart < 0) {
      this.sliceStart = now;
      // Runs after this turn's microtasks, before a yield's own setImmediate: the next turn starts afresh.
      setImmediate(this.endSlice);
      return false;
    }
    return now - this.sliceStart >= this.sliceMs;
  }

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
    if (this.sliceSpent()) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.sliceSpent();
    }
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
