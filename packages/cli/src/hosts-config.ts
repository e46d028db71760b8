import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type ControlPlanePin, checkControlPlanePins } from "@keelson/protocol";
import { usageError } from "./errors.ts";

/**
 * The hosts' config file of `keelson configure-hosts` and `upgrade-hosts` (spec §4.9, step 4;
 * README, "Upgrading the hosts"), YAML with the spec's parameter names:
 *
 *   hostAgentRepo: ./keelson-agent-0.2.0.tar.gz   # the agent package (pnpm pack:agent)
 *   dockerRepo: ./images-0.2.0.tar                # optional: an image archive, or a directory of them
 *   batchSize: 2                                  # hosts upgraded at once (default 1)
 *   hosts:                                        # the hosts these commands act on
 *     - name: worker-1
 *       ip: 10.0.0.11                             # checked against what the host reports
 *     - name: worker-2
 *   controlPlaneHosts:                            # optional: where the hosts' agents reach the control plane
 *     - name: keelson.example.internal            # a host name of the agents' KEELSON_CONTROL_PLANE
 *       ip: 10.0.1.20                             # the address they connect to for it
 *
 * Paths are relative to the file. `dockerRepo`'s archives are staged on the hosts by
 * configure-hosts (image-archives.ts), and so are `controlPlaneHosts` (the deployment unit's
 * name-to-IP mapping): the whole list replaces each listed host's pins; `[]` removes them.
 */
export interface HostsConfig {
  file: string;
  hostAgentRepo: string;
  /** The image bundle, absolute: an archive or a directory of them. */
  dockerRepo?: string;
  batchSize: number;
  hosts: { name: string; ip?: string }[];
  /** The agents' control-plane pins; undefined: left as they are. */
  controlPlaneHosts?: ControlPlanePin[];
}

const FIELDS = ["hostAgentRepo", "dockerRepo", "batchSize", "hosts", "controlPlaneHosts"];

export function parseHostsConfig(file: string, doc: Record<string, unknown>): HostsConfig {
  const bad = (field: string, rule: string) => usageError(`${file}: ${field} ${rule}`);
  for (const key of Object.keys(doc)) {
    if (!FIELDS.includes(key)) throw bad(key, `is not a field of the hosts' config (${FIELDS.join(", ")})`);
  }
  if (doc.dockerRepo !== undefined && (typeof doc.dockerRepo !== "string" || doc.dockerRepo === "")) {
    throw bad("dockerRepo", "must name an image archive (.tar) or a directory of them");
  }
  if (typeof doc.hostAgentRepo !== "string" || doc.hostAgentRepo === "") {
    throw bad("hostAgentRepo", "must name the agent package file (keelson-agent-<version>.tar.gz)");
  }
  const batchSize = doc.batchSize ?? 1;
  if (typeof batchSize !== "number" || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > 1000) {
    throw bad("batchSize", "must be an integer from 1 to 1000");
  }
  if (!Array.isArray(doc.hosts) || doc.hosts.length === 0) throw bad("hosts", "must list at least one host");
  const hosts = doc.hosts.map((entry: unknown, i) => {
    const h = (typeof entry === "string" ? { name: entry } : entry) as Record<string, unknown> | null;
    if (!h || typeof h !== "object" || typeof h.name !== "string" || h.name === "") {
      throw bad(`hosts[${i}]`, "must be a host name or {name, ip}");
    }
    const extra = Object.keys(h).find((k) => k !== "name" && k !== "ip");
    if (extra) throw bad(`hosts[${i}].${extra}`, "is not a field of a host (name, ip)");
    if (h.ip !== undefined && typeof h.ip !== "string") throw bad(`hosts[${i}].ip`, "must be an address");
    return { name: h.name, ...(typeof h.ip === "string" ? { ip: h.ip } : {}) };
  });
  const names = hosts.map((h) => h.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw bad("hosts", `names ${twice} twice`);
  const controlPlaneHosts = doc.controlPlaneHosts === undefined ? undefined : parsePins(doc.controlPlaneHosts, bad);
  return {
    file,
    hostAgentRepo: resolve(dirname(file), doc.hostAgentRepo),
    ...(typeof doc.dockerRepo === "string" ? { dockerRepo: resolve(dirname(file), doc.dockerRepo) } : {}),
    batchSize,
    hosts,
    ...(controlPlaneHosts ? { controlPlaneHosts } : {}),
  };
}

/** `controlPlaneHosts`: `{name, ip}` entries, under the pins' rules (protocol's control-plane-pins.ts). */
function parsePins(value: unknown, bad: (field: string, rule: string) => Error): ControlPlanePin[] {
  if (!Array.isArray(value))
    throw bad("controlPlaneHosts", "must list {name, ip} entries (or be [] to remove the pins)");
  const pins = value.map((entry: unknown, i) => {
    const e = entry as Record<string, unknown> | null;
    if (!e || typeof e !== "object" || typeof e.name !== "string" || typeof e.ip !== "string") {
      throw bad(`controlPlaneHosts[${i}]`, "must be {name, ip}: a host name of the control plane and its address");
    }
    const extra = Object.keys(e).find((k) => k !== "name" && k !== "ip");
    if (extra) throw bad(`controlPlaneHosts[${i}].${extra}`, "is not a field of a control-plane host (name, ip)");
    return { name: e.name, ip: e.ip };
  });
  const problem = checkControlPlanePins(pins);
  if (problem) {
    const at = problem.entry ? `[${problem.entry.index}].${problem.entry.field}` : "";
    throw bad(`controlPlaneHosts${at}`, problem.message);
  }
  return pins;
}

/** The agent package's bytes and sha256 (what the control plane stores it under). */
export function readAgentPackage(config: Pick<HostsConfig, "file" | "hostAgentRepo">): {
  bytes: Buffer;
  sha256: string;
} {
  let bytes: Buffer;
  try {
    bytes = readFileSync(config.hostAgentRepo);
  } catch (error) {
    throw usageError(`${config.file}: hostAgentRepo ${config.hostAgentRepo}: ${(error as Error).message}`);
  }
  return { bytes, sha256: createHash("sha256").update(bytes).digest("hex") };
}

/**
 * The hosts a command acts on: `--hosts a,b` (each must be in the config: the file is the list
 * of what may be touched), or every host of the config.
 */
export function selectHosts(config: HostsConfig, only: string | undefined): HostsConfig["hosts"] {
  if (only === undefined) return config.hosts;
  const names = only
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  if (names.length === 0) throw usageError("--hosts must name at least one host");
  return names.map((name) => {
    const host = config.hosts.find((h) => h.name === name);
    if (!host) throw usageError(`--hosts: ${name} is not listed in ${config.file}`);
    return host;
  });
}
