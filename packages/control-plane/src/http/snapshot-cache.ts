/**
 * Serialized read responses, valid for as long as the database has not changed.
 *
 * The store's change stamp moves with every write anyone commits: on SQLite every row written
 * through the store's connection and every commit by another one; on PostgreSQL every
 * transaction that writes, on any replica or client (the snapshot's xid range, see the
 * PostgreSQL store). While it stands still, a read computed from the database alone (no clock,
 * no request state) gives the same bytes, so the bytes can be served again; the first write
 * anywhere drops every entry at once. A value is kept only when the stamp read after computing
 * it equals the one read before: then nothing committed while it was computed. This trades
 * nothing in correctness for the hot read paths and is bounded in size.
 */
export class SnapshotCache {
  private seen: string | undefined;
  private readonly entries = new Map<string, string>();

  constructor(
    private readonly changeStamp: () => Promise<string>,
    private readonly maxEntries = 2000,
  ) {}

  async get(key: string, produce: () => Promise<string>): Promise<string> {
    const now = await this.changeStamp();
    if (now !== this.seen) {
      this.entries.clear();
      this.seen = now;
    }
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit;
    const value = await produce();
    // produce() only reads; if anything wrote meanwhile the entry must not outlive it. Nor may
    // it join entries another request keyed to a newer stamp meanwhile: on a pool, this
    // request's stamp reads can answer before that request's while taken after them.
    if ((await this.changeStamp()) !== now || this.seen !== now) return value;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }
}
