/**
 * Serialized read responses, valid for as long as what they read has not changed, with their
 * entity tag and their gzip and brotli encodings made once each.
 *
 * Each read comes with a change stamp that moves with every commit that changes what it reads,
 * whoever made it (the cluster reads: @keelson/db clusterChangeStamp, from the log the database's
 * triggers keep on any replica or client). While it stands still, a read computed from
 * the database alone (no clock, no request state) gives the same bytes, so the bytes can be
 * served again. A value is filed under a stamp only when the stamp of what it read equals the
 * one read before: then nothing committed in between. A read that brings that stamp from its
 * own snapshot (clusterChangeStampColumn) saves a look at the log; any other read's value is
 * checked against the stamp read again after it (then nothing committed while it was computed).
 *
 * A stamp proves nothing across a prune of the rows it counts: a row written after an answer
 * was filed, and pruned (past the log's retention) before the next read, leaves the stamp as it
 * was. So an entry is trusted only while its stamp was confirmed less than `maxAgeMs` ago (below
 * the retention, @keelson/db CLUSTER_CHANGES_RETENTION_MS): within that, no row written since can
 * have been pruned. Each hit confirms it again; an entry left unread longer is read whole once.
 *
 * After a write, an entry is computed again at its next request (the stamp says only that
 * something in the scope changed, not what); when the new bytes are the old ones (another
 * project's cluster, a node status that a record shows only as counts) the entry keeps its encodings and tag, so an unchanged
 * list is never compressed twice. Concurrent misses of one key under one stamp compute it once.
 * The entries, encodings included, are bounded by bytes; the least recently used go first.
 */
import { type Encoding, encode } from "./encodings.ts";
import { etagOf } from "./etag.ts";

/** One cached answer: its plain bytes, their tag, and each encoding made at most once. */
export class CachedAnswer {
  readonly etag: string;
  /** The body's length and those of the encodings made so far: what the answer holds. */
  size: number;
  private readonly encodings = new Map<Encoding, Promise<Buffer>>();

  constructor(
    readonly body: Buffer,
    /** The marker of the page after this one, when the answer is a page with more after it (paging.ts). */
    readonly nextPage: string | undefined,
    private readonly onEncoded: (answer: CachedAnswer, size: number) => void = () => {},
  ) {
    this.etag = etagOf(body, nextPage);
    this.size = body.length;
  }

  /** The body in `encoding`, made on the first call and shared by every later one. */
  encoded(encoding: Encoding): Promise<Buffer> {
    let made = this.encodings.get(encoding);
    if (!made) {
      made = encode(encoding, this.body);
      this.encodings.set(encoding, made);
      made.then(
        (bytes) => {
          this.size += bytes.length;
          this.onEncoded(this, bytes.length);
        },
        () => this.encodings.delete(encoding),
      );
    }
    return made;
  }
}

/**
 * What a read gives: JSON text, or JSON text with the marker of the next page (when it is a page
 * with more after it) and the change stamp of the snapshot it read, when the read's own
 * statement brought it.
 */
export type Produced = string | { text: string; nextPage?: string | undefined; stamp?: string | undefined };

interface Entry {
  /** The change stamp the answer was computed under (and nothing committed meanwhile). */
  stamp: string;
  /** When a read last found the database at `stamp` (the time it was asked, so never late). */
  confirmedAt: number;
  answer: CachedAnswer;
}

export interface SnapshotCacheOptions {
  /** The entries, encodings included, hold at most this many bytes. */
  maxBytes?: number;
  /** An entry whose stamp was last confirmed this long ago is not served (see above). */
  maxAgeMs: number;
  /** The clock of `maxAgeMs` (tests move it). */
  now?: () => number;
}

export class SnapshotCache {
  /**
   * Per key, the newest stamp a request read (hit or miss), while it matters: a computation
   * files its value only under that stamp. Dropped when the key's entry goes or its value is
   * filed; a key missing here files nothing (a miss later, never a stale answer).
   */
  private readonly seen = new Map<string, string>();
  /** In order of last use, oldest first. */
  private readonly entries = new Map<string, Entry>();
  private readonly computing = new Map<string, Promise<CachedAnswer>>();
  private held = 0;
  private readonly maxBytes: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;

  constructor(options: SnapshotCacheOptions) {
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.maxAgeMs = options.maxAgeMs;
    this.now = options.now ?? performance.now.bind(performance);
  }

  /** `key`'s entry while its stamp may still be trusted (see above). */
  private trusted(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    return entry && this.now() - entry.confirmedAt < this.maxAgeMs ? entry : undefined;
  }

  /** A read at `askedAt` found `entry`'s stamp: it is the most recently used and confirmed then. */
  private hit(key: string, entry: Entry, askedAt: number): CachedAnswer {
    entry.confirmedAt = Math.max(entry.confirmedAt, askedAt);
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.answer;
  }

  /** The bytes the entries hold, encodings included (at most `maxBytes`). */
  get bytes(): number {
    return this.held;
  }

  /** `key`'s answer: the one kept while `stamp()` stands still, else `produce()`'s. */
  async get(key: string, stamp: () => Promise<string>, produce: () => Promise<Produced>): Promise<CachedAnswer> {
    const askedAt = this.now();
    const now = await stamp();
    this.seen.set(key, now);
    const entry = this.trusted(key);
    if (entry && entry.stamp === now) return this.hit(key, entry, askedAt);
    const flight = `${now}\n${key}`;
    let computing = this.computing.get(flight);
    if (!computing) {
      computing = this.compute(key, now, askedAt, stamp, produce).finally(() => {
        this.computing.delete(flight);
        // Nothing filed (produce failed, or a write meanwhile): the mark goes, so keys that are
        // never filed (a bad page marker) leave nothing behind.
        if (!this.entries.has(key) && this.seen.get(key) === now) this.seen.delete(key);
      });
      this.computing.set(flight, computing);
    }
    return computing;
  }

  private async compute(
    key: string,
    now: string,
    askedAt: number,
    stamp: () => Promise<string>,
    produce: () => Promise<Produced>,
  ): Promise<CachedAnswer> {
    const produced = await produce();
    const answer = this.answerOf(key, produced);
    // produce() only reads; if anything it reads changed meanwhile the entry must not outlive
    // it. Nor may it join an entry another request keyed to a newer stamp meanwhile: on a pool,
    // this request's stamp reads can answer before that request's while taken after them.
    const readUnder = typeof produced === "string" ? undefined : produced.stamp;
    const after = readUnder ?? (await stamp());
    if (after !== now || this.seen.get(key) !== now) return answer;
    this.file(key, now, askedAt, answer);
    return answer;
  }

  /**
   * `key`'s answer from one read that takes the stamp the kept answer was filed under and
   * gives the stamp now and, only when they differ, the value read with it in one snapshot:
   * a hit and a miss each cost one look at the database. The value and its stamp come from
   * one snapshot, so filing it needs no second look and no guard against older requests: a
   * later read compares the database's stamp, never this one's age. Concurrent misses each
   * read (for small answers, a single record: a list of thousands computes once through get()).
   * A key is read through one of get() and unless(), never both.
   */
  async unless(
    key: string,
    read: (known: string | undefined) => Promise<{ stamp: string; produced?: Produced }>,
  ): Promise<CachedAnswer> {
    let askedAt = this.now();
    const known = this.trusted(key)?.stamp;
    let { stamp, produced } = await read(known);
    if (produced === undefined) {
      const kept = this.entries.get(key);
      if (kept?.stamp === stamp) return this.hit(key, kept, askedAt);
      // Filed again meanwhile under another stamp, or dropped: read the value whole.
      askedAt = this.now();
      ({ stamp, produced } = await read(undefined));
      if (produced === undefined) throw new Error(`the read of ${key} gave no value without a known stamp`);
    }
    const answer = this.answerOf(key, produced);
    this.file(key, stamp, askedAt, answer);
    return answer;
  }

  /**
   * An answer computed at every request (nothing stamps what it read: an operation, whose cursor
   * moves every few hundred milliseconds while it runs), kept only for its tag and encodings:
   * when `key`'s text is the bytes of the last one, that answer comes back, so a client polling
   * an unchanged answer does not have it compressed again. A key is read through computed() or
   * through get() and unless(), never both.
   */
  computed(key: string, text: string): CachedAnswer {
    const answer = this.answerOf(key, text);
    const kept = this.entries.get(key);
    if (kept?.answer === answer) return this.hit(key, kept, this.now());
    this.file(key, "", this.now(), answer);
    return answer;
  }

  /** What `produced` gives as an answer for `key`: the kept one, encodings and all, when the bytes are the same. */
  private answerOf(key: string, produced: Produced): CachedAnswer {
    const { text, nextPage } = typeof produced === "string" ? { text: produced } : produced;
    const fresh = new CachedAnswer(Buffer.from(text), nextPage, (answer, size) => this.encoded(key, answer, size));
    const previous = this.entries.get(key)?.answer;
    const same = previous && previous.etag === fresh.etag && previous.nextPage === fresh.nextPage;
    return same ? previous : fresh;
  }

  private file(key: string, stamp: string, confirmedAt: number, answer: CachedAnswer): void {
    this.remove(key);
    this.entries.set(key, { stamp, confirmedAt, answer });
    this.held += answer.size;
    this.trim();
  }

  /** An encoding finished: counted if its answer is still held under that key. */
  private encoded(key: string, answer: CachedAnswer, size: number): void {
    if (this.entries.get(key)?.answer !== answer) return;
    this.held += size;
    this.trim();
  }

  private remove(key: string): void {
    this.seen.delete(key);
    const entry = this.entries.get(key);
    if (!entry) return;
    this.held -= entry.answer.size;
    this.entries.delete(key);
  }

  private trim(): void {
    for (const key of this.entries.keys()) {
      if (this.held <= this.maxBytes) return;
      this.remove(key);
    }
  }
}
