import { api, waitUntil } from "../../e2e/support/processes.ts";

export { freePort } from "../../e2e/support/processes.ts";

/** The API as one token sees it: `call<T>(url, {method, body})`. */
export function apiAs(token: string) {
  return <T = unknown>(url: string, init: { method?: string; body?: unknown } = {}) => api<T>(url, token, init);
}

export function waitReady(url: string, timeoutMs = 60_000): Promise<true> {
  return waitUntil(`${url}/readyz`, async () => (await fetch(`${url}/readyz`)).ok || undefined, timeoutMs, 200);
}
