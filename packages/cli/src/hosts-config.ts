import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
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
 *
 * Paths are relative to the file. `dockerRepo`'s archives are staged on the hosts by
 * configure-hosts (image-archives.ts).
 */
export interface HostsConfig {
  file: string;
  hostAgentRepo: string;
  /** The image bundle, absolute: an archive or a directory of them. */
  dockerRepo?: string;
  batchSize: number;
  hosts: { name: string; ip?: string }[];
}

const FIELDS = ["hostAgentRepo", "dockerRepo", "batchSize", "hosts"];

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
  return {
    file,
    hostAgentRepo: resolve(dirname(file), doc.hostAgentRepo),
    ...(typeof doc.dockerRepo === "string" ? { dockerRepo: resolve(dirname(file), doc.dockerRepo) } : {}),
    batchSize,
    hosts,
  };
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
