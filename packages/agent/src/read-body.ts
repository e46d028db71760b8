import type { IncomingMessage } from "node:http";

/**
 * An HTTP message's body as UTF-8 text, once it has ended; rejects when the stream fails. With
 * `limit`, chunks are no longer kept once that many characters are in (a probe or an error
 * answer needs only its start).
 */
export function readBody(message: IncomingMessage, limit = Number.POSITIVE_INFINITY): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    message.setEncoding("utf8");
    message.on("data", (chunk: string) => {
      if (text.length < limit) text += chunk;
    });
    message.on("end", () => resolve(text));
    message.on("error", reject);
  });
}
