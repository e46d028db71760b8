import { hostname } from "node:os";
import type { ServerSettings } from "../settings.ts";
import { SERVER_VERSION } from "../version.ts";
import type { ReplicaSelf } from "./registry.ts";

/** This process as the replicas table records it: its id, the URL it answers at, machine and pid. */
export function replicaSelf(settings: ServerSettings, tls: boolean): ReplicaSelf {
  const host = settings.host.includes(":") ? `[${settings.host}]` : settings.host;
  return {
    id: settings.replicaId,
    url: settings.publicUrl ?? `${tls ? "https" : "http"}://${host}:${settings.port}`,
    version: SERVER_VERSION,
    host: hostname(),
    pid: process.pid,
  };
}
