/**
 * Serialized read responses, valid for as long as the database has not changed.
 *
 * SQLite's `total_changes()` counts every row this connection has written since it opened, and
 * the control plane writes through that one connection only. While the counter stands still,
 * a read computed from the database alone (no clock, no request state) gives the same bytes, so
 * the bytes can be served again; the first write anywhere drops every entry at once. This
 * trades nothing in correctness for the hot read paths and is bounded in size.
 */
export class SnapshotCache {
  private seen = -1;
  private readonly entries = new Map<string, string>();

  /** Without a change counter (PostgreSQL: other replicas write too) nothing is cached. */
  constructor(
    private readonly changeCount: (() => Promise<number>) | undefined,
    private readonly maxEntries = 2000,
  ) {}

  async get(key: string, produce: () => Promise<string>): Promise<string> {
    if (!this.changeCount) return produce();
    const now = await this.changeCount();
    if (now !== this.seen) {
      this.entries.clear();
      this.seen = now;
    }
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit;
    const value = await produce();
    // produce() only reads; if anything wrote meanwhile the entry must not outlive it.
    if ((await this.changeCount()) !== now) return value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }
}
