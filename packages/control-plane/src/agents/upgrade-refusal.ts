import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

/**
 * Answers a WebSocket upgrade request with a plain HTTP error instead: the refused peer never
 * gets a socket, and reads the API's `{code, message}` body (and headers such as Retry-After).
 */
export function rejectUpgrade(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ code, message });
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
      `Connection: close\r\nContent-Type: application/json\r\n${extra}` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
