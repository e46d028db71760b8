import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";

/** Packages are a few MiB; anything near this is not one of ours. */
export const MAX_PACKAGE_BYTES = 512 * 1024 * 1024;

export class DownloadError extends Error {
  override name = "DownloadError";
}

export interface DownloadOptions {
  signal?: AbortSignal;
  /** Default: Node's fetch; the agent passes its control-plane trust's (link/trust.ts). */
  fetch?: typeof fetch;
  maxBytes?: number;
}

/**
 * Copies the package at `url` (http, https or file) to `dest`, hashing it on the way so the
 * file is read once. Returns the hex sha256 and the size.
 */
export async function downloadPackage(
  url: string,
  dest: string,
  options: DownloadOptions = {},
): Promise<{ sha256: string; bytes: number }> {
  const maxBytes = options.maxBytes ?? MAX_PACKAGE_BYTES;
  const source = await openSource(url, options.signal, options.fetch);
  const hash = createHash("sha256");
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        callback(new DownloadError(`${url} is larger than ${maxBytes} bytes`));
        return;
      }
      hash.update(chunk);
      callback(null, chunk);
    },
  });
  try {
    await pipeline(source, meter, createWriteStream(dest, { mode: 0o600 }), { signal: options.signal });
  } catch (err) {
    if (err instanceof DownloadError) throw err;
    throw new DownloadError(`downloading ${url} failed: ${(err as Error).message}`);
  }
  return { sha256: hash.digest("hex"), bytes };
}

/**
 * The checksum published beside a package, `<url>.sha256`, in sha256sum's format (the hash,
 * then optionally the file name). Undefined when there is no such file.
 */
export async function fetchPublishedSha256(
  url: string,
  signal?: AbortSignal,
  doFetch: typeof fetch = fetch,
): Promise<string | undefined> {
  const sumUrl = siblingUrl(url, ".sha256");
  let text: string;
  if (sumUrl.protocol === "file:") {
    try {
      text = await readFile(fileURLToPath(sumUrl), "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new DownloadError(`reading ${sumUrl.href} failed: ${(err as Error).message}`);
    }
  } else {
    const response = await fetchOrThrow(sumUrl.href, signal, doFetch);
    if (response.status === 404) return undefined;
    if (!response.ok) throw new DownloadError(`${sumUrl.href} answered HTTP ${response.status}`);
    text = await response.text();
  }
  const hex = text.trim().split(/\s+/)[0] ?? "";
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new DownloadError(`${sumUrl.href} does not hold a sha256`);
  return hex.toLowerCase();
}

/** `<url><suffix>` on the path, keeping any query string where it was. */
export function siblingUrl(url: string, suffix: string): URL {
  const parsed = new URL(url);
  parsed.pathname += suffix;
  return parsed;
}

async function openSource(url: string, signal?: AbortSignal, doFetch: typeof fetch = fetch): Promise<Readable> {
  const parsed = new URL(url);
  if (parsed.protocol === "file:") {
    const path = fileURLToPath(parsed);
    // Open eagerly so a missing file fails here with its own message, not mid-pipeline.
    const stream = createReadStream(path);
    await new Promise<void>((resolve, reject) => {
      stream.once("open", () => resolve());
      stream.once("error", (err: NodeJS.ErrnoException) =>
        reject(
          new DownloadError(
            err.code === "ENOENT" ? `${path} does not exist` : `reading ${path} failed: ${err.message}`,
          ),
        ),
      );
    });
    return stream;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new DownloadError(`scheme ${parsed.protocol} is not supported (http, https or file)`);
  }
  const response = await fetchOrThrow(url, signal, doFetch);
  if (!response.ok || !response.body) throw new DownloadError(`${url} answered HTTP ${response.status}`);
  return Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
}

async function fetchOrThrow(url: string, signal: AbortSignal | undefined, doFetch: typeof fetch): Promise<Response> {
  try {
    return await doFetch(url, { redirect: "follow", ...(signal ? { signal } : {}) });
  } catch (err) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    throw new DownloadError(`fetching ${url} failed: ${cause ?? (err as Error).message}`);
  }
}
