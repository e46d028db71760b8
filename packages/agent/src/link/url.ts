import { AGENT_LINK_PATH } from "@keelson/protocol";

/**
 * The link's WebSocket URL from the control plane's address: `http(s)://host:port[/prefix]`
 * becomes `ws(s)://host:port[/prefix]/v1/agents/link`; a ws(s) URL is taken as it is.
 */
export function linkUrl(controlPlane: string): string {
  const url = new URL(controlPlane);
  if (url.protocol === "ws:" || url.protocol === "wss:") return url.toString();
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`the control plane URL must be http(s) or ws(s), not ${url.protocol}`);
  }
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${AGENT_LINK_PATH}`;
  url.search = "";
  url.hash = "";
  return url.toString();
}
