import { addressesClash, isWithin, listenersOn, socketHolders } from "../../services/port-holder.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { tryBind } from "./net.ts";

/**
 * Fails at once when a port a service is about to listen on is held by a process that is not
 * the service's own. Without it a leftover process (an etcd from an earlier install, a stray
 * test server) makes the new service exit on bind, the supervisor restart it, and the phase sit
 * in `executing` until the health wait runs out, with no word about why.
 *
 * `ownPid` is the service's running process (null when it is not running): the port held by it
 * or a child of it is the service itself, which a restart frees.
 */
export async function expectPortsFree(
  ctx: PhaseContext,
  service: string,
  ports: number[],
  ownPid: number | null,
): Promise<void> {
  const host = ctx.config.primaryIp;
  const problems: string[] = [];
  for (const port of ports) {
    const sockets = listenersOn(port).filter((l) => addressesClash(l.address, host));
    const holders = socketHolders(new Set(sockets.map((s) => s.inode)));
    const foreign = holders.filter((h) => ownPid === null || !isWithin(h.pid, ownPid));
    if (foreign.length > 0) {
      const names = foreign.map((h) => `${h.comm} (pid ${h.pid})`).join(", ");
      const on = [...new Set(sockets.map((s) => s.address))].join(", ");
      problems.push(`port ${port} is already in use by ${names}, listening on ${on}`);
      continue;
    }
    // Sockets seen but their holder not (another user's process without root), or none seen
    // at all: let the kernel answer. Only when our service is down, or it would answer for it.
    if (ownPid === null && (sockets.length > 0 || (await tryBind(host, port)) === "EADDRINUSE")) {
      problems.push(`port ${port} on ${host} is already in use by a process this agent cannot identify`);
    }
  }
  if (problems.length > 0) {
    throw new PhaseError(`cannot start ${service}: ${problems.join("; ")}; stop that process or free the port`);
  }
}
