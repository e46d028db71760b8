/**
 * Stored cluster -> the v4 and v3 read records: exactly the read set of each version (§2.1 and
 * its read-only tables), with the read-direction types.
 *
 * Values of fields that are not set, chosen once for every field so clients can rely on them:
 * strings "", integers 0, booleans false, lists [], objects {}; except `upgradingTo`, null as
 * the spec says, and the fields with a default (§8), which read as their default. A field
 * typed integer-on-read (privileged, the 0/1 flags, v3 calicoNatOutgoing) reads 1/0;
 * `useVendorDomain` reads "true"/"false".
 *
 * The §2.1 fields come from the field table (spec/fields.ts): which reads return them, their
 * read types and defaults. This module lists only the read-only fields, which no client sets.
 */
import type { clusters } from "@keelson/db";
import { isPlainObject } from "../spec/coerce.ts";
import { type ApiVersion, CLUSTER_FIELDS, type FieldDef, type SpecField } from "../spec/fields.ts";

/** Everything a read needs; the cluster service fills it from the database. */
export interface ClusterView {
  /** The row; its `spec` column holds the ClusterSpec. */
  row: typeof clusters.$inferSelect;
  cloudProvider: { uuid: string; name: string; type: string };
  nodePool: { uuid: string; name: string };
  masterStatus: string;
  workerStatus: string;
  /** catalogue.upgradeTargets(row.kubeRoleVersion). */
  upgrade: { patch: string | null; minor: string | null };
  /** The etcd version of the cluster's role version (v3 read's `etcdVersion`); "" when not given. */
  etcdVersion?: string;
}

interface Ctx {
  view: ClusterView;
  /**
   * The stored spec, read loosely: a read must not fail on a row whatever wrote it, so each
   * value is checked for its type and an unexpected one reads as "not set".
   */
  spec: Readonly<Record<string, unknown>>;
  version: ApiVersion;
}

type Getter = (c: Ctx) => unknown;

/**
 * The type a read field has on the wire; read-schema.ts turns it into the response schema, so
 * the serialiser and the presenter cannot disagree. `natOutgoing`: boolean in v4, 0/1 in v3.
 */
export type ReadType =
  | "string"
  | "integer"
  | "boolean"
  | "strings"
  | "stringMap"
  | "stringOrNull"
  | "etcdBackup"
  | "natOutgoing";

interface ReadField {
  type: ReadType;
  get: Getter;
}

const field = (type: ReadType, get: Getter): ReadField => ({ type, get });

/** A spec value, or its default when not set; booleans also as the 1/0 an older parser stored. */
function specValue(spec: Ctx["spec"], name: SpecField): unknown {
  const entry: FieldDef = CLUSTER_FIELDS[name];
  return spec[name] ?? entry.default;
}
const isOn = (value: unknown): boolean => value === true || value === 1;
const asText = (value: unknown): string => (typeof value === "string" ? value : "");
const asInteger = (value: unknown): number => (typeof value === "number" ? value : 0);

/** The read of one §2.1 field, from its table entry. */
function specRead(name: SpecField): ReadField {
  const entry: FieldDef = CLUSTER_FIELDS[name];
  const value = ({ spec }: Ctx) => specValue(spec, name);
  switch (entry.readAs) {
    case "flag":
      return field("integer", (c) => (isOn(value(c)) ? 1 : 0));
    case "text":
      return field("string", (c) => (isOn(value(c)) ? "true" : "false"));
    case "natOutgoing":
      return field("natOutgoing", (c) => (c.version === "v4" ? isOn(value(c)) : isOn(value(c)) ? 1 : 0));
    case undefined:
      break;
  }
  switch (entry.kind) {
    case "string":
    case "numericString":
      return field("string", (c) => asText(value(c)));
    case "integer":
      return field("integer", (c) => asInteger(value(c)));
    case "flag":
      return field("integer", (c) => (isOn(value(c)) ? 1 : 0));
    case "boolean":
      return field("boolean", (c) => isOn(value(c)));
    case "stringArray":
      return field("strings", (c) => {
        const v = value(c);
        return Array.isArray(v) ? v : [];
      });
    case "stringMap":
      return field("stringMap", (c) => {
        const v = value(c);
        return isPlainObject(v) ? v : {};
      });
  }
}

const fixed = (value: string | number | boolean): ReadField =>
  field(typeof value === "number" ? "integer" : typeof value === "boolean" ? "boolean" : "string", () => value);
const text = (get: Getter): ReadField => field("string", get);

const isCalico = (spec: Ctx["spec"]) => specValue(spec, "networkPlugin") === "calico";
const canUpgrade = ({ view }: Ctx) => view.upgrade.patch !== null || view.upgrade.minor !== null;

/**
 * §2.1 fields whose read comes from the row rather than the spec: an upgrade moves the role
 * version to its column, the unique index guards the name column, and the node pool is the one
 * the cluster was placed in.
 */
const FROM_ROW: Partial<Record<SpecField, ReadField>> = {
  name: text(({ view }) => view.row.name),
  nodePoolUuid: text(({ view }) => view.nodePool.uuid),
  kubeRoleVersion: text(({ view }) => view.row.kubeRoleVersion),
};

const SPEC_FIELDS = Object.keys(CLUSTER_FIELDS) as SpecField[];
const specReadsOf = (version: ApiVersion): SpecField[] =>
  SPEC_FIELDS.filter((name) => {
    const read: FieldDef["read"] = CLUSTER_FIELDS[name].read;
    return read === "both" || read === version;
  });

const SPEC_READS: Record<string, ReadField> = Object.fromEntries(
  SPEC_FIELDS.map((name) => [name, FROM_ROW[name] ?? specRead(name)]),
);

/**
 * The backup fields as the v4 read nests them (`etcdBackup`), from the table's nested paths:
 * the same values as the flat fields, except that the switch reads 1/0 there.
 */
export const NESTED_BACKUP_READS: readonly { name: SpecField; path: readonly string[]; type: ReadType; get: Getter }[] =
  SPEC_FIELDS.flatMap((name) => {
    const entry: FieldDef = CLUSTER_FIELDS[name];
    if (entry.nested === undefined) return [];
    const read =
      entry.kind === "boolean" ? field("integer", (c) => (isOn(specValue(c.spec, name)) ? 1 : 0)) : specRead(name);
    return [{ name, path: entry.nested.split(".").slice(1), ...read }];
  });

/** Sets `value` at `path` in `tree`, making the objects on the way. */
export function setAtPath(tree: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = tree;
  for (const key of path.slice(0, -1)) {
    const next = isPlainObject(node[key]) ? node[key] : {};
    node[key] = next;
    node = next;
  }
  node[path.at(-1) as string] = value;
}

function nestedBackup(c: Ctx): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { path, get } of NESTED_BACKUP_READS) setAtPath(out, path, get(c));
  // The backup job's own status: the spec's second `taskStatus`.
  out.taskStatus = c.view.row.backupTaskStatus;
  out.taskErrorDetail = c.view.row.backupTaskErrorDetail;
  return out;
}

/** Read-only fields (§2.1's read-only tables), each with the reads that return it. */
const READ_ONLY: Record<string, ReadField & { in: "both" | ApiVersion }> = {
  ...both({
    uuid: text(({ view }) => view.row.id),
    projectId: text(({ view }) => view.row.projectId),
    isKubernetes: fixed(1),
    // Applies only to OpenStack providers, which Keelson does not have.
    masterIp: fixed(""),
    masterVipVrouterId: text(({ view }) => view.row.masterVipVrouterId),
    status: text(({ view }) => view.row.status),
    masterStatus: text(({ view }) => view.masterStatus),
    workerStatus: text(({ view }) => view.workerStatus),
    flannelIfaceLabel: fixed(""),
    flannelPublicIfaceLabel: fixed(""),
    dockerRoot: text(({ spec }) => (spec.containerRuntime === "docker" ? "/var/lib/docker" : "/var/lib/containerd")),
    etcdDataDir: fixed("/var/lib/etcd"),
    lastOp: text(({ view }) => view.row.lastOp),
    lastOk: text(({ view }) => view.row.lastOk ?? ""),
    keystoneEnabled: fixed(1),
    // Every master's kube-apiserver runs --authorization-mode=Node,RBAC (the agent's kubelet
    // phase), whatever the spec: authorization is always on.
    authzEnabled: fixed(1),
    taskStatus: text(({ view }) => view.row.taskStatus),
    taskError: text(({ view }) => view.row.taskError),
    // The backup job's detail; its `taskStatus` (the spec's second one) is in v4's etcdBackup.
    taskErrorDetail: text(({ view }) => view.row.backupTaskErrorDetail),
    nodePoolName: text(({ view }) => view.nodePool.name),
    cloudProviderUuid: text(({ view }) => view.cloudProvider.uuid),
    cloudProviderName: text(({ view }) => view.cloudProvider.name),
    cloudProviderType: text(({ view }) => view.cloudProvider.type),
    canUpgrade: field("boolean", canUpgrade),
  }),
  ...only("v4", {
    // The spec reads it as "TLS encryption on etcd": every master's etcd serves clients and peers
    // over mutual TLS with the cluster CA (the agent's etcd phase), so "true". Encryption of
    // data at rest (--encryption-provider-config) is not configured; the README says which.
    enableEtcdEncryption: fixed("true"),
    // Compatibility: the backup settings nested, with the backup job's own taskStatus.
    etcdBackup: field("etcdBackup", nestedBackup),
  }),
  // Keelson has no Mesos/Swarm, debug mode, IPv6 or spot workers: those read as off, and the
  // spot counts as "0" (a count, not an unset value).
  ...only("v3", {
    isMesos: fixed(0),
    isSwarm: fixed(0),
    debug: fixed(false),
    ipv6: fixed(false),
    canMinorUpgrade: field("integer", ({ view }) => (view.upgrade.minor !== null ? 1 : 0)),
    minorUpgradeRoleVersion: text(({ view }) => view.upgrade.minor ?? ""),
    canPatchUpgrade: field("integer", ({ view }) => (view.upgrade.patch !== null ? 1 : 0)),
    patchUpgradeRoleVersion: text(({ view }) => view.upgrade.patch ?? ""),
    upgradingTo: field("stringOrNull", ({ view }) => view.row.upgradingTo ?? null),
    kubeProxyMode: fixed("iptables"),
    apiserverStorageBackend: fixed("etcd3"),
    monitoring: text(({ spec }) => (isOn(specValue(spec, "enableCatapultMonitoring")) ? "true" : "false")),
    numSpotWorkers: fixed("0"),
    spotWorkerFlavor: fixed(""),
    spotPrice: fixed(""),
    numMaxSpotWorkers: fixed("0"),
    // Calico's address detection as Keelson configures it; empty when Calico is not the plugin.
    calicoIPv4: text(({ spec }) => (isCalico(spec) ? "autodetect" : "")),
    calicoIPv4DetectionMethod: text(({ spec }) => (isCalico(spec) ? "first-found" : "")),
    calicoIPv6: text(({ spec }) => (isCalico(spec) ? "none" : "")),
    calicoIPv6DetectionMethod: fixed(""),
    calicoIPv6PoolCidr: fixed(""),
    calicoIPv6PoolBlockSize: fixed(""),
    calicoIPv6PoolNatOutgoing: fixed(0),
    felixIPv6Support: fixed(false),
    etcdVersion: text(({ view }) => view.etcdVersion ?? ""),
  }),
};

function only(version: "both" | ApiVersion, fields: Record<string, ReadField>) {
  return Object.fromEntries(Object.entries(fields).map(([key, read]) => [key, { ...read, in: version }]));
}
function both(fields: Record<string, ReadField>) {
  return only("both", fields);
}

function readKeysOf(version: ApiVersion): readonly string[] {
  const readOnly = Object.entries(READ_ONLY).flatMap(([key, read]) =>
    read.in === "both" || read.in === version ? [key] : [],
  );
  return Object.freeze([...specReadsOf(version), ...readOnly]);
}

/** The keys of each version's read record, in the order a read lists them. */
export const CLUSTER_READ_KEYS_V4 = readKeysOf("v4");
export const CLUSTER_READ_KEYS_V3 = readKeysOf("v3");

function readField(key: string): ReadField | undefined {
  return READ_ONLY[key] ?? SPEC_READS[key];
}

/** Each version's keys with their getters, looked up once: a read then only calls them. */
const readersOf = (keys: readonly string[]) => keys.map((key) => [key, (readField(key) as ReadField).get] as const);
const READERS_V4 = readersOf(CLUSTER_READ_KEYS_V4);
const READERS_V3 = readersOf(CLUSTER_READ_KEYS_V3);

function present(view: ClusterView, version: ApiVersion, readers: typeof READERS_V4): Record<string, unknown> {
  const spec: Ctx["spec"] = isPlainObject(view.row.spec) ? view.row.spec : {};
  const ctx: Ctx = { view, spec, version };
  const out: Record<string, unknown> = {};
  for (const [key, get] of readers) out[key] = get(ctx);
  return out;
}

export function presentClusterV4(view: ClusterView): Record<string, unknown> {
  return present(view, "v4", READERS_V4);
}

export function presentClusterV3(view: ClusterView): Record<string, unknown> {
  return present(view, "v3", READERS_V3);
}

/** The wire type of a read key (read-schema.ts); throws for a key no read has. */
export function readTypeOf(key: string): ReadType {
  const found = readField(key);
  if (!found) throw new Error(`presenters: no read field ${key}`);
  return found.type;
}
