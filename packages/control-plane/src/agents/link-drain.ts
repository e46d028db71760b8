import { CloseCode } from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import type { AgentSession } from "./sessions.ts";

/**
 * Closes every socket with going-away (agents reconnect, to another replica if there is one),
 * waits up to `timeoutMs` for them to acknowledge, then cuts the rest.
 */
export async function closeAll(sockets: ReadonlySet<AgentSession>, timeoutMs: number, reason: string): Promise<void> {
  const sessions = [...sockets];
  const closed = sessions.map(
    (s) =>
      new Promise<void>((resolve) =>
        s.socket.readyState === s.socket.CLOSED ? resolve() : s.socket.once("close", () => resolve()),
      ),
  );
  for (const s of sessions) s.close(CloseCode.GOING_AWAY, reason);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(closed),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  for (const s of sockets) s.socket.terminate();
}

/** One heartbeat: a link that missed two pongs in a row is terminated, the others pinged. */
export function pingAll(sessions: Iterable<AgentSession>, log: FastifyBaseLogger): void {
  for (const session of sessions) {
    if (session.missedPongs >= 2) {
      log.warn({ hostId: session.hostId, session: session.id }, "agent missed two heartbeats; terminating its link");
      session.socket.terminate();
      continue;
    }
    session.missedPongs++;
    try {
      session.socket.ping();
    } catch {
      // Socket already closing: its close event will clean up.
    }
  }
}
