import { createHash } from "node:crypto";

/**
 * The cloud SDK clients the server keeps between requests, one per cloud, account, service,
 * endpoint, region and credentials (the secret only as a hash in the key). A reused client skips
 * what a new one pays on its first call: on AWS a connection, a TLS handshake and the derived
 * signing key (`pnpm bench aws` measured about 10 ms for a fresh client's call against the
 * stand-in and 1.5 ms for a reused one); on Azure and GCP also the token request, for their
 * clients keep the access token they got until it runs out. A re-key makes a new key, so new
 * credentials never ride on an old client (nor an old token); the account's id in the Azure and
 * GCP keys means an account deleted and made again never finds its predecessor's. The least
 * recently used client beyond the limit is dropped, and destroyed once any call it still carries
 * has had its time; all of them when the server closes.
 *
 * A credential check never takes a kept client on Azure and GCP (cloud-checks.ts): a kept token
 * would answer for a secret the cloud has revoked since. AWS signs every request with the
 * secret itself, so its kept clients check it on every call.
 */
/** Where an Azure or GCP account's client is kept: the server's cache, under the account's id. */
export interface KeptBy {
  clients: CloudClientCache;
  accountId: string;
}

interface Destroyable {
  destroy(): void;
}

export class CloudClientCache {
  private readonly clients = new Map<string, Destroyable>();

  constructor(
    private readonly limit = 64,
    /** How long an evicted client may still finish calls it carries. */
    private readonly graceMs = 120_000,
  ) {}

  /** The key of a client: what tells it apart (`parts`, an unset one as empty) and the secret's hash. */
  static keyOf(secret: string, ...parts: (string | undefined)[]): string {
    const hash = createHash("sha256").update(secret).digest("hex");
    return [...parts.map((part) => part ?? ""), hash].join("|");
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
