/**
 * The one rule for a proxy URL, wherever Keelson takes one: the cluster field httpProxy (the API
 * refuses anything else), the agent's HTTPS_PROXY/HTTP_PROXY settings, and the proxy the node's
 * containerd gets. A scheme is required: the agent's CONNECT client needs it, and with it the
 * value means the same to curl and to Go's http.ProxyFromEnvironment (containerd).
 */
export const PROXY_URL_RULE = "an http:// or https:// proxy URL (http://proxy.example.com:3128), no path";

/** Why `value` is not a proxy URL ("must be …"), or undefined when it is one. */
export function checkProxyUrl(value: string): string | undefined {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {}
  const ok = url && ["http:", "https:"].includes(url.protocol) && url.hostname && ["", "/"].includes(url.pathname);
  return ok ? undefined : `must be ${PROXY_URL_RULE}`;
}
