/**
 * Paging of the large lists (clusters, nodes, hosts) for the clients that ask: `limit` and the
 * opaque `continue` marker of the previous page's `Link: <…>; rel="next"` header. A client
 * that sends neither gets the whole array, as before paging existed.
 *
 * The marker is the last item's creation time and uuid (base64url of a JSON pair), not a
 * position: a page starts right after that item however many were created or deleted before
 * it. Should that item be gone, the page starts at the first item created at or after its
 * time: an item can then come twice (clients key by uuid), never be skipped. The cluster lists
 * page in SQL (`keysetPage`), by (creation time, uuid), their order: a gone item's page starts
 * right after its place, repeating nothing.
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

/** Where a page starts: just after the item with this uuid, created at `at`. */
interface Marker {
  at: string;
  id: string;
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
    parsed.length !== 2 ||
    typeof parsed[0] !== "string" ||
    typeof parsed[1] !== "string" ||
    Buffer.from(JSON.stringify(parsed)).toString("base64url") !== text
  ) {
    throw badRequest("continue", "continue must be the marker of a previous page's Link header", "invalid_continue");
  }
  return { at: parsed[0], id: parsed[1] };
}

/** Where the first page starts: before every item (every creation time and uuid sorts after ""). */
export const FIRST_PAGE: Marker = { at: "", id: "" };

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
  return Buffer.from(JSON.stringify([marker.at, marker.id])).toString("base64url");
}

/**
 * A page of `items` (in list order, which is creation order) and the marker of the next, if
 * any items are left. `markerOf` gives an item's creation time and uuid.
 */
export function pageOf<T>(
  items: readonly T[],
  markerOf: (item: T) => Marker,
  page: PageRequest,
): { items: T[]; next?: string } {
  let start = 0;
  const { after } = page;
  if (after) {
    const at = items.findIndex((item) => markerOf(item).id === after.id);
    start = at >= 0 ? at + 1 : items.findIndex((item) => markerOf(item).at >= after.at);
    if (start < 0) start = items.length;
  }
  const slice = items.slice(start, start + page.limit);
  const last = slice[slice.length - 1];
  return start + slice.length < items.length && last !== undefined
    ? { items: slice, next: markerText(markerOf(last)) }
    : { items: slice };
}

/** The Link header of a page with more after it: this URL with `continue` set to `next`. */
export function linkNextPage(request: FastifyRequest, reply: FastifyReply, next: string | undefined): void {
  if (next === undefined) return;
  const url = new URL(request.originalUrl, "http://x");
  url.searchParams.set("continue", next);
  reply.header("link", `<${url.pathname}${url.search}>; rel="next"`);
}

/** The page of `items` the request asks for (all of them when it asks for none), its Link header set. */
export function pageForRequest<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  items: readonly T[],
  markerOf: (item: T) => Marker,
): readonly T[] {
  const page = pageRequest(request.query as PageParams);
  if (!page) return items;
  const paged = pageOf(items, markerOf, page);
  linkNextPage(request, reply, paged.next);
  return paged.items;
}
