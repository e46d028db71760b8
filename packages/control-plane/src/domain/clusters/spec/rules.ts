/**
 * Defaults (§8 and §2.1, declared in fields.ts) and the rules between cluster fields (§4.8 and the dependencies §2.1
 * states), checked on the whole spec: the body of a create, or the merged result of an update.
 * Each violation is a 400 naming the field to fix and the rule.
 */

import { blocksOverlap } from "@keelson/protocol";
import { badRequest } from "../../../http/errors.ts";
import { nestedPathOf } from "./etcd-backup.ts";
import { type ClusterSpec, SPEC_DEFAULTS, type SpecField } from "./fields.ts";
import { parseCidr } from "./formats.ts";

/** A spec under construction: typed keys, any of which may still be missing. */
export type DraftSpec = Partial<ClusterSpec>;

/** etcd's own defaults, used to check a timing the client gave against the one it left out. */
export const ETCD_DEFAULT_HEARTBEAT_MS = 100;
export const ETCD_DEFAULT_ELECTION_MS = 1000;

export function applyDefaults(spec: DraftSpec): void {
  const target: Record<string, unknown> = spec;
  for (const [field, value] of Object.entries(SPEC_DEFAULTS)) {
    if (target[field] === undefined) target[field] = value;
  }
  // 'local' is the only storage there is (§8), so enabling backups without naming it means it.
  if (spec.isEtcdBackupEnabled === true && spec.storageType === undefined) spec.storageType = "local";
}

/**
 * How to name a field in a message: as the client sent it (flat or nested). For a field the
 * client did not send, `like` is a related field that it did: a missing count is named in the
 * nested style when the interval came in the nested object.
 */
export type PathOf = (field: SpecField, like?: SpecField) => string;

export function pathNamer(paths: ReadonlyMap<SpecField, string>): PathOf {
  return (field, like) => {
    const given = paths.get(field);
    if (given) return given;
    if (like && paths.get(like)?.startsWith("etcdBackup.")) return nestedPathOf(field);
    return field;
  };
}

function required(field: SpecField, like: SpecField | undefined, why: string, pathOf: PathOf) {
  const path = pathOf(field, like);
  return badRequest(path, `${path} is required ${why}`);
}

/**
 * Checks every cross-field rule; returns the fields a rule says to ignore (rule 3: privateSubnets
 * without vpc), which it removes from `spec`.
 */
export function checkClusterRules(spec: DraftSpec, pathOf: PathOf): SpecField[] {
  const dropped: SpecField[] = [];

  // Rule 1. numMin <= numMax holds whenever both are given: a reversed range is never intended.
  if (spec.enableCAS === true) {
    if (spec.numMinWorkers === undefined) {
      throw required("numMinWorkers", undefined, "when enableCAS is true (rule 4.8.1)", pathOf);
    }
    if (spec.numMaxWorkers === undefined) {
      throw required("numMaxWorkers", undefined, "when enableCAS is true (rule 4.8.1)", pathOf);
    }
  }
  if (spec.numMinWorkers !== undefined && spec.numMaxWorkers !== undefined && spec.numMinWorkers > spec.numMaxWorkers) {
    throw badRequest(
      pathOf("numMinWorkers"),
      `numMinWorkers (${spec.numMinWorkers}) must not exceed numMaxWorkers (${spec.numMaxWorkers})`,
    );
  }

  // Rule 2. The spec waives httpProxy when the private subnet reaches the Internet through a
  // VPN, but nothing in the interface tells the service that; so it is always required, and a
  // VPN user passes the proxy they would otherwise not need.
  if (spec.internalElb === true) {
    if (spec.isPrivate !== true) {
      throw badRequest(pathOf("isPrivate"), "isPrivate must be true when internalElb is true (rule 4.8.2)");
    }
    if (spec.vpc === undefined) throw required("vpc", undefined, "when internalElb is true (rule 4.8.2)", pathOf);
    if (spec.httpProxy === undefined) {
      throw required("httpProxy", undefined, "when internalElb is true (rule 4.8.2)", pathOf);
    }
  }

  // Rule 3.
  if (spec.vpc === undefined) {
    if (spec.privateSubnets !== undefined) {
      delete spec.privateSubnets;
      dropped.push("privateSubnets");
    }
  } else if (spec.isPrivate === true && spec.privateSubnets === undefined) {
    throw required("privateSubnets", undefined, "when vpc is set and isPrivate is true (rule 4.8.3)", pathOf);
  }

  // Rule 4.
  if (spec.masterVipIpv4 !== undefined && spec.masterVipIface === undefined) {
    throw required("masterVipIface", undefined, "when masterVipIpv4 is given (rule 4.8.4)", pathOf);
  }

  checkBackupRules(spec, pathOf);
  // Rule 6 (certExpiryHrs > 0) is a range of the field itself: fields.ts.

  if (spec.enableMetallb === true && spec.metallbCidr === undefined) {
    throw required("metallbCidr", undefined, "when enableMetallb is true", pathOf);
  }

  if (spec.containersCidr !== undefined && spec.servicesCidr !== undefined) {
    const pods = parseCidr(spec.containersCidr, pathOf("containersCidr"));
    const services = parseCidr(spec.servicesCidr, pathOf("servicesCidr"));
    if (blocksOverlap(pods, services)) {
      throw badRequest(
        pathOf("servicesCidr"),
        `servicesCidr ${spec.servicesCidr} overlaps containersCidr ${spec.containersCidr}; they must be disjoint`,
      );
    }
  }

  checkEtcdTimings(spec, pathOf);
  return dropped;
}

/** Rule 5 and the storage rules of §2.1/§8. */
function checkBackupRules(spec: DraftSpec, pathOf: PathOf): void {
  if (spec.intervalInMins !== undefined && spec.intervalInHours !== undefined) {
    const path = pathOf("intervalInHours");
    throw badRequest(path, `${path}: intervalInMins and intervalInHours are mutually exclusive (rule 4.8.5)`);
  }
  const interval: SpecField | undefined =
    spec.intervalInMins !== undefined
      ? "intervalInMins"
      : spec.intervalInHours !== undefined
        ? "intervalInHours"
        : undefined;
  if (interval && spec.maxIntervalBackupCount === undefined) {
    throw required("maxIntervalBackupCount", interval, `when ${interval} is given (rule 4.8.5)`, pathOf);
  }
  if (spec.dailyBackupTime !== undefined && spec.maxTimestampBackupCount === undefined) {
    throw required("maxTimestampBackupCount", "dailyBackupTime", "when dailyBackupTime is given (rule 4.8.5)", pathOf);
  }
  if (spec.localPath !== undefined && spec.storageType !== "local") {
    const path = pathOf("localPath");
    throw badRequest(path, `${path} applies only to storageType 'local'; set storageType to local`);
  }
}

/**
 * etcd refuses to start when the election timeout is under 5 heartbeats; a value the client
 * left out is etcd's default, which is what etcd will run with.
 */
function checkEtcdTimings(spec: DraftSpec, pathOf: PathOf): void {
  const { etcdHeartbeatIntervalMs: heartbeat, etcdElectionTimeoutMs: election } = spec;
  if (heartbeat === undefined && election === undefined) return;
  const h = heartbeat ?? ETCD_DEFAULT_HEARTBEAT_MS;
  const e = election ?? ETCD_DEFAULT_ELECTION_MS;
  if (e < 5 * h) {
    const field: SpecField = election === undefined ? "etcdHeartbeatIntervalMs" : "etcdElectionTimeoutMs";
    const path = pathOf(field);
    throw badRequest(
      path,
      `${path}: etcdElectionTimeoutMs (${e}${election === undefined ? ", the default" : ""}) must be at least ` +
        `5 times etcdHeartbeatIntervalMs (${h}${heartbeat === undefined ? ", the default" : ""})`,
    );
  }
}
