/**
 * Entity tags of JSON answers, computed from the bytes: every replica sends the same tag for
 * the same answer, so a client's If-None-Match holds across a load balancer.
 *
 * The tag is weak (`W/"…"`): one tag names the plain, gzip and brotli forms of an answer, which
 * RFC 9110 §8.8.1 allows only a weak validator to do; If-None-Match compares weakly anyway
 * (§13.1.2).
 */
import { createHash } from "node:crypto";

/**
 * A page's tag covers the marker of the page after it too: the same items with a next page
 * added or gone are another answer (its `Link` header differs), so a client revalidating the
 * page must not be told 304 and keep a stale link. A whole list (no marker) keeps the tag of
 * its bytes alone.
 */
export function etagOf(bytes: Buffer | string, nextPage?: string): string {
  const hash = createHash("sha256").update(bytes);
  if (nextPage !== undefined) hash.update(`\nnext:${nextPage}`);
  return `W/"${hash.digest("base64url").slice(0, 32)}"`;
}

/** Whether an If-None-Match header names `etag` (or is `*`), by the weak comparison. */
export function ifNoneMatchHas(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const opaque = etag.replace(/^W\//, "");
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === opaque;
  });
}
