import type { Session } from "./session.ts";

/** The API's error body (`{code, message, field?}`), or what the console makes of a failure without one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/** Called when the API refuses the session's token (expired, revoked): back to the login form. */
let onExpired: () => void = () => {};
export function whenSessionRefused(handler: () => void): void {
  onExpired = handler;
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string; field?: string };
    return new ApiError(res.status, body.code ?? `http_${res.status}`, body.message ?? text, body.field);
  } catch {
    return new ApiError(res.status, `http_${res.status}`, text || res.statusText);
  }
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
}

export async function request(session: Session | null, path: string, options: RequestOptions = {}): Promise<Response> {
  const query = Object.entries(options.query ?? {}).filter(([, v]) => v !== undefined && v !== "");
  const url = query.length ? `${path}?${new URLSearchParams(query.map(([k, v]) => [k, String(v)]))}` : path;
  const headers: Record<string, string> = { ...options.headers };
  if (session) headers["x-auth-token"] = session.token;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(url, {
    method: options.method ?? "GET",
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  if (!res.ok) {
    const error = await errorOf(res);
    // The API says exactly this when the token itself is missing, unknown or expired (not a role refusal).
    if (session && res.status === 403 && error.message.startsWith("a valid X-Auth-Token")) onExpired();
    throw error;
  }
  return res;
}

/** A JSON call; a 200 without a body reads as undefined. */
export async function call<T>(session: Session | null, path: string, options: RequestOptions = {}): Promise<T> {
  const res = await request(session, path, options);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A project path: `/v4/{projectId}/...`. */
export const v4 = (session: Session, rest: string) => `/v4/${session.projectId}/${rest}`;
export const v3 = (session: Session, rest: string) => `/v3/${session.projectId}/${rest}`;
