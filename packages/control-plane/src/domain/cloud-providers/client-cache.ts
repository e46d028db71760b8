import { createHash } from "node:crypto";

/**
 * The AWS SDK clients the server keeps between requests, one per service, endpoint, region and
 * credentials (the secret only as a hash in the key). A reused client skips what a new one pays
 * on its first call (a connection, on AWS a TLS handshake, the derived signing key): `pnpm bench
 * aws` measured about 10 ms for a fresh client's call against the stand-in and 1.5 ms for a
 * reused one. A re-key makes a new key, so new credentials never ride on an old client. The
 * least recently used client beyond the limit is dropped, and destroyed once any call it
 * still carries has had its time; all of them when the server closes.
 */
interface Destroyable {
  destroy(): void;
}

export class AwsClientCache {
  private readonly clients = new Map<string, Destroyable>();

  constructor(
    private readonly limit = 64,
    /** How long an evicted client may still finish calls it carries. */
    private readonly graceMs = 120_000,
  ) {}

  static keyOf(parts: { service: string; endpoint?: string; region: string; key: string; secret: string }): string {
    const secret = createHash("sha256").update(parts.secret).digest("hex");
    return [parts.service, parts.endpoint ?? "", parts.region, parts.key, secret].join("|");
  }

  get<C extends Destroyable>(key: string, make: () => C): C {
    const found = this.clients.get(key);
    if (found) {
      // Re-inserted, so the Map's order is least recently used first.
      this.clients.delete(key);
      this.clients.set(key, found);
      return found as C;
    }
    const client = make();
    this.clients.set(key, client);
    if (this.clients.size > this.limit) {
      const [oldestKey, oldest] = this.clients.entries().next().value as [string, Destroyable];
      this.clients.delete(oldestKey);
      setTimeout(() => oldest.destroy(), this.graceMs).unref();
    }
    return client;
  }

  get size(): number {
    return this.clients.size;
  }

  destroy(): void {
    for (const client of this.clients.values()) client.destroy();
    this.clients.clear();
  }
}
