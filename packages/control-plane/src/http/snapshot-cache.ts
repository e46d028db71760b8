/**
 * Serialized read responses, valid for as long as the database has not changed.
 *
 * On SQLite the store's change stamp moves with every row written through its connection and
 * every commit by another one. While it stands still, a read computed from the database alone
 * (no clock, no request state) gives the same bytes, so the bytes can be served again; the
 * first write anywhere drops every entry at once. This trades nothing in correctness for the
 * hot read paths and is bounded in size. On PostgreSQL there is no stamp and nothing is cached.
 */
export class SnapshotCache {
  private seen: string | undefined;
  private readonly entries = new Map<string, string>();

  /** Without a change counter (PostgreSQL: other replicas write too) nothing is cached. */
  constructor(
    private readonly changeStamp: (() => Promise<string>) | undefined,
    private readonly maxEntries = 2000,
  ) {}

  async get(key: string, produce: () => Promise<string>): Promise<string> {
    if (!this.changeStamp) return produce();
    const now = await this.changeStamp();
    if (now !== this.seen) {
      this.entries.clear();
      this.seen = now;
    }
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit;
    const value = await produce();
    // produce() only reads; if anything wrote meanwhile the entry must not outlive it.
    if ((await this.changeStamp()) !== now) return value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }
}
