import { createHash, timingSafeEqual } from "node:crypto";

/**
 * Who may use the local API (spec §4.9 with DESIGN.md "Identity"): the holder of the local
 * token in `<state dir>/local-api.token`, or of a project token of this host's project. A
 * project token is checked with the control plane over the link and the answer cached
 * briefly, so a script polling the host record does not become a stream of link requests.
 * Without the link only the local token works: an unverifiable token is refused, never
 * trusted.
 */
export type TokenVerifier = (token: string) => Promise<boolean>;

export type TokenVerdict = { ok: true; via: "local" | "project" } | { ok: false; reason: string };

export interface TokenCheckOptions {
  localToken: string;
  verify: TokenVerifier;
  /** How long a valid project token is trusted without asking again. */
  validTtlMs?: number;
  /** How long a refused token stays refused (short: a token minted a moment ago should work soon). */
  invalidTtlMs?: number;
  now?: () => number;
}

export class TokenCheck {
  private readonly cache = new Map<string, { valid: boolean; until: number }>();
  private readonly localDigest: Buffer;
  private readonly validTtlMs: number;
  private readonly invalidTtlMs: number;
  private readonly now: () => number;

  constructor(private readonly options: TokenCheckOptions) {
    this.localDigest = digest(options.localToken);
    this.validTtlMs = options.validTtlMs ?? 30_000;
    this.invalidTtlMs = options.invalidTtlMs ?? 5_000;
    this.now = options.now ?? Date.now;
  }

  async check(token: string | undefined): Promise<TokenVerdict> {
    if (!token) return { ok: false, reason: "X-Auth-Token is required" };
    const key = digest(token);
    // Compare digests: equal length, so the comparison is constant-time whatever was sent.
    if (timingSafeEqual(key, this.localDigest)) return { ok: true, via: "local" };
    const cacheKey = key.toString("hex");
    const cached = this.cache.get(cacheKey);
    if (cached && cached.until > this.now()) {
      return cached.valid
        ? { ok: true, via: "project" }
        : { ok: false, reason: "the token is not valid for this host" };
    }
    let valid: boolean;
    try {
      valid = await this.options.verify(token);
    } catch {
      return {
        ok: false,
        reason: "the control plane cannot be reached to check this token; use the local token on the host",
      };
    }
    this.remember(cacheKey, valid);
    return valid ? { ok: true, via: "project" } : { ok: false, reason: "the token is not valid for this host" };
  }

  private remember(key: string, valid: boolean): void {
    // Bounded: someone spraying random tokens must not grow this without limit.
    if (this.cache.size >= 1000) {
      const now = this.now();
      for (const [k, v] of this.cache) if (v.until <= now) this.cache.delete(k);
      if (this.cache.size >= 1000) this.cache.clear();
    }
    this.cache.set(key, { valid, until: this.now() + (valid ? this.validTtlMs : this.invalidTtlMs) });
  }
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}
