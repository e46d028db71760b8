/**
 * The one rule for a proxy URL, wherever Keelson takes one: the cluster field httpProxy (the API
 * refuses anything else), the agent's HTTPS_PROXY/HTTP_PROXY settings, and the proxy the node's
 * containerd gets. Read as curl and Go's http.ProxyFromEnvironment (containerd) read one: an
 * http:// or https:// URL, or `host:port` without a scheme, which means http:// (the form the
 * service's clients may already send, so it is taken, not refused).
 */
export const PROXY_URL_RULE =
  "an http:// or https:// proxy URL (http://proxy.example.com:3128), or host:port meaning http://; no path";

/** `value` with its scheme: as given when it has one, else http:// before it. */
export function proxyUrlText(value: string): string {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) ? value : `http://${value}`;
}

/** The proxy `value` names, or undefined when it names none by the rule above. */
export function parseProxyUrl(value: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(proxyUrlText(value));
  } catch {
    return undefined;
  }
  const ok = ["http:", "https:"].includes(url.protocol) && url.hostname && ["", "/"].includes(url.pathname);
  return ok && !url.search && !url.hash ? url : undefined;
}

/** Why `value` is not a proxy URL ("must be …"), or undefined when it is one. */
export function checkProxyUrl(value: string): string | undefined {
  return parseProxyUrl(value) ? undefined : `must be ${PROXY_URL_RULE}`;
}
