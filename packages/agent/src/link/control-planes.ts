import { checkHttpUrl, HTTP_URL_RULE } from "@keelson/settings";

/**
 * The control-plane addresses an agent may link to (KEELSON_CONTROL_PLANE: one URL, a balanced
 * address, or several replicas' URLs comma-separated). The agent starts at a random one, so
 * agents spread over the replicas, and moves to the next whenever a link attempt fails or a link
 * ends: a replica that died or stops gives way to the next live one.
 */
export class ControlPlanes {
  private index: number;

  constructor(
    readonly urls: readonly string[],
    random: () => number = Math.random,
  ) {
    if (urls.length === 0) throw new Error("ControlPlanes: no URL");
    this.index = Math.floor(random() * urls.length) % urls.length;
  }

  /** The URL linked to now (or tried next). */
  get current(): string {
    return this.urls[this.index] as string;
  }

  /** Moves to the next URL, around the list; answers it. */
  next(): string {
    this.index = (this.index + 1) % this.urls.length;
    return this.current;
  }
}

/** KEELSON_CONTROL_PLANE's entries, trailing slashes removed (empty entries are errors, not skipped). */
export function splitControlPlanes(value: string): string[] {
  return value.split(",").map((entry) => entry.trim().replace(/\/+$/, ""));
}

export const CONTROL_PLANES_RULE = `${HTTP_URL_RULE}, or several comma-separated (the replicas' URLs)`;

/** The settings check: names the first entry that is not an http(s) URL, or a repeated one. */
export function checkControlPlanes(value: string): string | undefined {
  const entries = splitControlPlanes(value);
  if (entries.length === 1) return checkHttpUrl(value);
  for (const [i, entry] of entries.entries()) {
    if (checkHttpUrl(entry)) return `entry ${i + 1} (${JSON.stringify(entry)}) must be ${HTTP_URL_RULE}`;
    if (entries.indexOf(entry) !== i) return `entry ${i + 1} (${entry}) repeats entry ${entries.indexOf(entry) + 1}`;
  }
  return undefined;
}
