import { randomBytes } from "node:crypto";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { ENCODINGS, type Encoding, encode } from "../src/http/encodings.ts";

const decode = (encoding: Encoding, bytes: Buffer) =>
  encoding === "br" ? brotliDecompressSync(bytes) : gunzipSync(bytes);

/** Whether `promise` settles within a few turns of the microtask queue, before any I/O callback can run. */
async function settlesAtOnce(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return settled;
}

/** JSON-like text that compresses (a list of records) with some entropy in it, `size` bytes. */
const body = (size: number) => {
  const text = JSON.stringify(
    Array.from({ length: Math.ceil(size / 60) }, (_, i) => ({ id: `node-${i}`, key: randomBytes(8).toString("hex") })),
  );
  return Buffer.from(text.slice(0, size));
};

describe("encode", () => {
  it("encodes a small answer in place and a large one on the thread pool, each decoding to the body", async () => {
    for (const encoding of ENCODINGS) {
      const small = body(3_000);
      const inPlace = encode(encoding, small);
      // A record or an operation: no round trip through the pool, which cost several times the encoding.
      expect(await settlesAtOnce(inPlace)).toBe(true);
      expect(decode(encoding, await inPlace).equals(small)).toBe(true);

      const large = body(600_000);
      const pooled = encode(encoding, large);
      // A list of thousands: the event loop stays free while it is compressed.
      expect(await settlesAtOnce(pooled)).toBe(false);
      expect(decode(encoding, await pooled).equals(large)).toBe(true);
    }
  });
});
