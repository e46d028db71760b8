import { type Static, Type } from "typebox";
import type { HostFacts } from "./facts.ts";

/**
 * The host record of the port-8082 interface (spec §4.9) and of the control plane's
 * `/v1/hosts` resource. Both are built here so the agent's local view and the control plane's
 * view of a host cannot drift apart. The first block of fields is the shape existing clients
 * of this interface read; the camelCase fields after it are Keelson's own.
 */

export const HostAgentStatus = Type.Union([Type.Literal("running"), Type.Literal("updating")]);

export const HostRecord = Type.Object({
  id: Type.String({ description: "Host UUID (the node uuid)" }),
  info: Type.Object({
    hostname: Type.String(),
    /** As `uname -m` prints it (x86_64, aarch64), the spelling existing clients expect. */
    arch: Type.String(),
    /** Kernel family: Linux, Darwin, ... */
    os_family: Type.String(),
    /** Distribution, release and codename, e.g. "Debian GNU/Linux 12 bookworm". */
    os_info: Type.String(),
    responding: Type.Boolean({ description: "true while the host's agent is connected" }),
    last_response_time: Type.Union([Type.String(), Type.Null()], {
      description: "When the agent was last heard from, while it is not responding; null while it is",
    }),
  }),
  roles: Type.Array(Type.String()),
  role_status: Type.String({ description: "Node status: ok, converging or failed" }),
  message: Type.String({ description: "The last host-agent error (for example a failed upgrade); empty when none" }),
  host_agent: Type.Object({
    version: Type.String(),
    status: HostAgentStatus,
    error: Type.Optional(Type.String()),
  }),
  extensions: Type.Object({
    interfaces: Type.Object({
      status: Type.String(),
      data: Type.Object({
        iface_ip: Type.Record(Type.String(), Type.String(), { description: "First IPv4 address per interface" }),
        primary_ip: Type.String(),
      }),
    }),
  }),
  // ---- Keelson's own fields ----
  facts: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
    description: "Every fact the agent reported (hostname, OS, kernel, CPU, memory, disks, interfaces)",
  }),
  nodeStatus: Type.String({ description: "ok, converging or failed" }),
  clusterUuid: Type.Union([Type.String(), Type.Null()], { description: "Cluster the host belongs to" }),
  phases: Type.Array(Type.Unknown(), { description: "Per-phase statuses once the host runs node phases" }),
  conditions: Type.Array(Type.Object({ code: Type.String(), message: Type.String(), since: Type.String() }), {
    description:
      "What is wrong on the host while its agent works on: `state_dir_full` (the agent's state dir has no space; it keeps its link and the node's phases run on)",
  }),
});
export type HostRecord = Static<typeof HostRecord>;

export interface HostRecordInput {
  id: string;
  /** Facts as reported; the control plane reads them back from its database, so be lenient. */
  facts: HostFacts | Record<string, unknown> | null | undefined;
  /** Fallbacks for when facts are missing (a host that registered but never said hello). */
  hostname?: string;
  primaryIp?: string;
  responding: boolean;
  /** ISO time the agent was last heard from; shown only while not responding. */
  lastSeen?: string | null;
  agentVersion: string;
  agentStatus: "running" | "updating";
  agentError?: string | null;
  roles?: string[];
  nodeStatus?: string;
  clusterUuid?: string | null;
  phases?: unknown[];
}

const UNAME_ARCH: Record<string, string> = { x64: "x86_64", arm64: "aarch64", ia32: "i386", arm: "armv7l" };
const OS_FAMILY: Record<string, string> = { linux: "Linux", darwin: "Darwin", win32: "Windows", freebsd: "FreeBSD" };

export function buildHostRecord(input: HostRecordInput): HostRecord {
  const facts = asFacts(input.facts);
  const arch = facts?.arch ?? "";
  const platform = facts?.os?.platform ?? "";
  const os = facts?.os;
  const osInfo = [os?.distro, os?.release, os?.codename].filter((part) => part && part.length > 0).join(" ");
  const error = input.agentError ?? "";
  return {
    id: input.id,
    info: {
      hostname: facts?.hostname ?? input.hostname ?? "",
      arch: UNAME_ARCH[arch] ?? arch,
      os_family: OS_FAMILY[platform] ?? platform,
      os_info: osInfo,
      responding: input.responding,
      last_response_time: input.responding ? null : (input.lastSeen ?? null),
    },
    roles: input.roles ?? [],
    role_status: input.nodeStatus ?? "ok",
    message: error,
    host_agent: {
      version: input.agentVersion,
      status: input.agentStatus,
      ...(error ? { error } : {}),
    },
    extensions: {
      interfaces: {
        status: "ok",
        data: { iface_ip: interfaceIps(facts), primary_ip: facts?.primaryIp || input.primaryIp || "" },
      },
    },
    facts: (input.facts as Record<string, unknown> | null | undefined) ?? null,
    nodeStatus: input.nodeStatus ?? "ok",
    clusterUuid: input.clusterUuid ?? null,
    phases: input.phases ?? [],
    conditions: conditionsOf(facts),
  };
}

/** The facts' conditions, kept only where they have the reported shape (the database is read leniently). */
function conditionsOf(facts: Partial<HostFacts> | null): HostRecord["conditions"] {
  const list = Array.isArray(facts?.conditions) ? facts.conditions : [];
  return list.flatMap((c) =>
    c && typeof c.code === "string" && typeof c.message === "string" && typeof c.since === "string"
      ? [{ code: c.code, message: c.message, since: c.since }]
      : [],
  );
}

/** First IPv4 address of each interface that has one, in report order. */
function interfaceIps(facts: Partial<HostFacts> | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const iface of facts?.interfaces ?? []) {
    const v4 = iface?.addresses?.find((a) => typeof a === "string" && /^\d{1,3}(\.\d{1,3}){3}$/.test(a));
    if (iface?.name && v4) out[iface.name] = v4;
  }
  return out;
}

function asFacts(value: HostRecordInput["facts"]): Partial<HostFacts> | null {
  return value && typeof value === "object" ? (value as Partial<HostFacts>) : null;
}
