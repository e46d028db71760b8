/**
 * Paging of the large lists (clusters, nodes, hosts) for the clients that ask: `limit` and the
 * opaque `continue` marker of the previous page's `Link: <…>; rel="next"` header. A client
 * that sends neither gets the whole array, as before paging existed.
 *
 * The marker is the last item's place in the list's order, not a position: a page starts right
 * after that item however many were created or deleted before it. It is base64url of a JSON
 * array: creation time and uuid for the cluster lists, ordered by (creation time, uuid); those
 * two and the name for the node and host lists, ordered by (creation time, name, uuid). All page
 * in SQL (`keysetPage`): a gone item's page starts right after its place, repeating nothing.
 * A node or host marker without the name (the pair every list gave before the name was added,
 * which clients may still hold) starts after its item, found by uuid; should that item be gone,
 * at the first item created at or after its time: an item can then come twice (clients key by
 * uuid), never be skipped.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { type Static, Type } from "typebox";
import { badRequest } from "./errors.ts";

export const MAX_PAGE = 10_000;

export const PageQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_PAGE,
      description: `Most items in this answer (1-${MAX_PAGE}); the Link header (rel="next") names the next page`,
    }),
  ),
  continue: Type.Optional(
    Type.String({ description: 'The marker of the previous page\'s Link header (rel="next"): the page after it' }),
  ),
});
export type PageParams = Static<typeof PageQuery>;

/** The OpenAPI extension of a paged list (routes' `schema`): how to page, for client generators. */
export const PAGING_EXTENSION = {
  "x-keelson-paging": {
    limitParameter: "limit",
    continueParameter: "continue",
    next: 'Link response header, rel="next": the URL of the next page; absent on the last page',
    maxLimit: MAX_PAGE,
    withoutLimit: "the whole list in one answer",
  },
};

/** Where a page starts: just after the item with this uuid, created at `at` (named `name`, in lists ordered by it). */
export interface Marker {
  at: string;
  id: string;
  name?: string;
}

export interface PageRequest {
  limit: number;
  after?: Marker;
}

/** The page asked for, or undefined for the whole list. A bad marker is a 400 naming `continue`. */
export function pageRequest(query: PageParams): PageRequest | undefined {
  if (query.limit === undefined && query.continue === undefined) return undefined;
  const limit = query.limit ?? MAX_PAGE;
  return query.continue === undefined ? { limit } : { limit, after: parseMarker(query.continue) };
}

function parseMarker(text: string): Marker {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    (parsed.length !== 2 && parsed.length !== 3) ||
    !parsed.every((part) => typeof part === "string") ||
    Buffer.from(JSON.stringify(parsed)).toString("base64url") !== text
  ) {
    throw badRequest("continue", "continue must be the marker of a previous page's Link header", "invalid_continue");
  }
  const [at, id, name] = parsed as [string, string, string?];
  return name === undefined ? { at, id } : { at, id, name };
}

/** Where the first page starts: before every item (every creation time, name and uuid sorts after ""). */
export const FIRST_PAGE: Required<Marker> = { at: "", id: "", name: "" };

/**
 * A page from rows read after the marker in list order, one more than `limit` asked for: that
 * one only tells there is a next page.
 */
export function keysetPage<T>(
  rows: readonly T[],
  markerOf: (item: T) => Marker,
  limit: number,
): { items: T[]; next?: string } {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return rows.length > limit && last !== undefined ? { items, next: markerText(markerOf(last)) } : { items };
}

function markerText(marker: Marker): string {
  const parts = marker.name === undefined ? [marker.at, marker.id] : [marker.at, marker.id, marker.name];
  return Buffer.from(JSON.stringify(parts)).toString("base64url");
}

/** The Link header of a page with more after it: this URL with `continue` set to `next`. */
export function linkNextPage(request: FastifyRequest, reply: FastifyReply, next: string | undefined): void {
  if (next === undefined) return;
  const url = new URL(request.originalUrl, "http://x");
  url.searchParams.set("continue", next);
  reply.header("link", `<${url.pathname}${url.search}>; rel="next"`);
}
