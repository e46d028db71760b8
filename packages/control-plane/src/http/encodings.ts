/**
 * The content codings the API answers in, in one place: the compression plugin (every
 * response it compresses on the fly) and the cached answers (encoded once, snapshot-cache.ts)
 * negotiate the same codings from Accept-Encoding with the same negotiator and encode with the
 * same parameters.
 */
import { promisify } from "node:util";
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from "node:zlib";
import { Negotiator } from "@fastify/accept-negotiator";

/** Brotli first: about 20% smaller than gzip on the cluster lists, at a like cost at quality 4. */
export const ENCODINGS = ["br", "gzip"] as const;
export type Encoding = (typeof ENCODINGS)[number];

/** 11 (zlib's default) costs seconds on a 2.5 MB list; 4 is the plugin's own default. */
const brotliOptions = { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } };

/** Below this many bytes an answer goes out plain: the coding's overhead outweighs the saving. */
export const COMPRESS_THRESHOLD = 1024;

/** The options of @fastify/compress (app.ts), so that it and `encode` agree. */
export const compressPluginOptions = { encodings: [...ENCODINGS], brotliOptions, threshold: COMPRESS_THRESHOLD };

const negotiator = new Negotiator<Encoding | "identity">({ supportedValues: [...ENCODINGS, "identity"] });

/**
 * The coding to answer a request in, or undefined for the plain bytes. As the plugin does,
 * `*` and `x-gzip` count as gzip.
 */
export function negotiateEncoding(acceptEncoding: string | undefined): Encoding | undefined {
  if (acceptEncoding === undefined) return undefined;
  const chosen = negotiator.negotiate(acceptEncoding.toLowerCase().replace(/\*|x-gzip/gu, "gzip"));
  return chosen === null || chosen === "identity" ? undefined : chosen;
}

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/**
 * Up to this many bytes a body is encoded on the event loop. Handing a small body to the thread
 * pool (a zlib stream, its handle, the callbacks back) cost 140-290 µs of CPU where encoding it
 * in place costs 20-60 (a cluster record of 3 KB, a rollout's operation of 40 KB, gzip; 128 KB
 * takes about 0.2 ms in place): a record read right after a write paid more for that than for
 * its statement.
 */
const IN_PLACE_BYTES = 128 * 1024;

/**
 * Encodes `bytes`: a small body at once, a large one (a list of thousands, tens of ms) on libuv's
 * thread pool, so the event loop stays free while it is compressed.
 */
export function encode(encoding: Encoding, bytes: Buffer): Promise<Buffer> {
  if (bytes.length <= IN_PLACE_BYTES) {
    try {
      return Promise.resolve(encoding === "br" ? brotliCompressSync(bytes, brotliOptions) : gzipSync(bytes));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  return encoding === "br" ? brotli(bytes, brotliOptions) : gzipped(bytes);
}
