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
 * Over 400 lines because it is, for now, one of the lists every cluster field appears in; the
 * single field table (issue 9, not yet built) will fold its per-field entries into one table.
 */
import type { clusters } from "@keelson/db";
import { isPlainObject } from "../spec/coerce.ts";
import { SPEC_DEFAULTS } from "../spec/rules.ts";
import type { ApiVersion, ClusterSpec } from "../spec/spec.ts";

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
  spec: Record<string, unknown>;
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

const str = (name: keyof ClusterSpec): ReadField =>
  field("string", ({ spec }) => {
    const value = spec[name];
    return typeof value === "string" ? value : "";
  });
const int = (name: keyof ClusterSpec): ReadField =>
  field("integer", ({ spec }) => {
    const value = spec[name];
    return typeof value === "number" ? value : 0;
  });
/** Tolerates either stored type, so a spec written by an older parser still reads right. */
const isOn = (spec: Record<string, unknown>, name: keyof ClusterSpec): boolean =>
  spec[name] === true || spec[name] === 1;
const bool = (name: keyof ClusterSpec): ReadField => field("boolean", ({ spec }) => isOn(spec, name));
const flag = (name: keyof ClusterSpec): ReadField => field("integer", ({ spec }) => (isOn(spec, name) ? 1 : 0));
const list = (name: keyof ClusterSpec): ReadField =>
  field("strings", ({ spec }) => {
    const value = spec[name];
    return Array.isArray(value) ? value : [];
  });
const map = (name: keyof ClusterSpec): ReadField =>
  field("stringMap", ({ spec }) => {
    const value = spec[name];
    return isPlainObject(value) ? value : {};
  });

/** The wire type of a constant or a default: what the value itself is. */
function typeOfValue(value: string | number | boolean): ReadType {
  return typeof value === "number" ? "integer" : typeof value === "boolean" ? "boolean" : "string";
}
const withDefault = (name: keyof typeof SPEC_DEFAULTS): ReadField =>
  field(typeOfValue(SPEC_DEFAULTS[name]), ({ spec }) => spec[name] ?? SPEC_DEFAULTS[name]);
const fixed = (value: string | number | boolean): ReadField => field(typeOfValue(value), () => value);
const text = (get: Getter): ReadField => field("string", get);

const isCalico = (spec: Record<string, unknown>) => (spec.networkPlugin ?? SPEC_DEFAULTS.networkPlugin) === "calico";
const canUpgrade = ({ view }: Ctx) => view.upgrade.patch !== null || view.upgrade.minor !== null;

const FIELDS: Record<string, ReadField> = {
  // §2.1 fields. name and kubeRoleVersion come from the typed columns: an upgrade moves the
  // role version there, and the column is what the unique index guards for the name.
  name: text(({ view }) => view.row.name),
  nodePoolUuid: text(({ view }) => view.nodePool.uuid),
  numMasters: int("numMasters"),
  numWorkers: int("numWorkers"),
  enableCAS: bool("enableCAS"),
  numMinWorkers: int("numMinWorkers"),
  numMaxWorkers: int("numMaxWorkers"),
  allowWorkloadsOnMaster: flag("allowWorkloadsOnMaster"),
  privileged: flag("privileged"),
  appCatalogEnabled: flag("appCatalogEnabled"),
  ami: str("ami"),
  customAmi: str("customAmi"),
  azs: list("azs"),
  region: str("region"),
  masterFlavor: str("masterFlavor"),
  workerFlavor: str("workerFlavor"),
  sshKey: str("sshKey"),
  domainId: str("domainId"),
  serviceFqdn: str("serviceFqdn"),
  externalDnsName: str("externalDnsName"),
  useVendorDomain: text(({ spec }) => (isOn(spec, "useVendorDomain") ? "true" : "false")),
  vpc: str("vpc"),
  subnets: list("subnets"),
  privateSubnets: list("privateSubnets"),
  isPrivate: bool("isPrivate"),
  internalElb: bool("internalElb"),
  httpProxy: str("httpProxy"),
  containersCidr: str("containersCidr"),
  servicesCidr: str("servicesCidr"),
  runtimeConfig: str("runtimeConfig"),
  k8sApiPort: withDefault("k8sApiPort"),
  masterVipIpv4: str("masterVipIpv4"),
  masterVipIface: str("masterVipIface"),
  masterVipVrouterId: text(({ view }) => view.row.masterVipVrouterId),
  enableMetallb: bool("enableMetallb"),
  metallbCidr: str("metallbCidr"),
  networkPlugin: withDefault("networkPlugin"),
  calicoV4BlockSize: str("calicoV4BlockSize"),
  calicoIpIpMode: str("calicoIpIpMode"),
  // Boolean in v4 create and read, integer in v3 read (§2.1).
  calicoNatOutgoing: field("natOutgoing", ({ spec, version }) => {
    const on = isOn(spec, "calicoNatOutgoing");
    return version === "v4" ? on : on ? 1 : 0;
  }),
  calicoNodeCpuLimit: str("calicoNodeCpuLimit"),
  calicoNodeMemoryLimit: str("calicoNodeMemoryLimit"),
  calicoTyphaCpuLimit: str("calicoTyphaCpuLimit"),
  calicoTyphaMemoryLimit: str("calicoTyphaMemoryLimit"),
  calicoControllerCpuLimit: str("calicoControllerCpuLimit"),
  calicoControllerMemoryLimit: str("calicoControllerMemoryLimit"),
  mtuSize: str("mtuSize"),
  dockerLiveRestoreEnabled: bool("dockerLiveRestoreEnabled"),
  isEtcdBackupEnabled: bool("isEtcdBackupEnabled"),
  intervalInMins: int("intervalInMins"),
  intervalInHours: int("intervalInHours"),
  dailyBackupTime: str("dailyBackupTime"),
  maxIntervalBackupCount: int("maxIntervalBackupCount"),
  maxTimestampBackupCount: int("maxTimestampBackupCount"),
  storageType: str("storageType"),
  localPath: str("localPath"),
  tags: map("tags"),
  kubeRoleVersion: text(({ view }) => view.row.kubeRoleVersion),
  cpuManagerPolicy: withDefault("cpuManagerPolicy"),
  topologyManagerPolicy: withDefault("topologyManagerPolicy"),
  reservedCPUs: str("reservedCPUs"),
  dockerPrivateRegistry: str("dockerPrivateRegistry"),
  quayPrivateRegistry: str("quayPrivateRegistry"),
  gcrPrivateRegistry: str("gcrPrivateRegistry"),
  k8sPrivateRegistry: str("k8sPrivateRegistry"),
  useHostname: bool("useHostname"),
  enableProfileAgent: bool("enableProfileAgent"),
  enableCatapultMonitoring: field("boolean", ({ spec }) =>
    spec.enableCatapultMonitoring === undefined
      ? SPEC_DEFAULTS.enableCatapultMonitoring
      : isOn(spec, "enableCatapultMonitoring"),
  ),
  dockerCentosPackageRepoUrl: str("dockerCentosPackageRepoUrl"),
  dockerUbuntuPackageRepoUrl: str("dockerUbuntuPackageRepoUrl"),
  containerRuntime: str("containerRuntime"),
  certExpiryHrs: withDefault("certExpiryHrs"),
  addonOperatorImageTag: str("addonOperatorImageTag"),
  addonVersions: map("addonVersions"),
  deployVendorOperator: flag("deployVendorOperator"),
  deployKubevirt: flag("deployKubevirt"),
  etcdHeartbeatIntervalMs: int("etcdHeartbeatIntervalMs"),
  etcdElectionTimeoutMs: int("etcdElectionTimeoutMs"),
  masterless: bool("masterless"),

  // Read-only fields of both versions.
  uuid: text(({ view }) => view.row.id),
  projectId: text(({ view }) => view.row.projectId),
  isKubernetes: fixed(1),
  // Applies only to OpenStack providers, which Keelson does not have.
  masterIp: fixed(""),
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
  enableEtcdEncryption: fixed("false"),
  etcdBackup: field("etcdBackup", (c) => ({
    isEtcdBackupEnabled: flag("isEtcdBackupEnabled").get(c),
    storageType: str("storageType").get(c),
    storageProperties: { localPath: str("localPath").get(c) },
    intervalInMins: int("intervalInMins").get(c),
    intervalInHours: int("intervalInHours").get(c),
    dailyBackupTime: str("dailyBackupTime").get(c),
    maxIntervalBackupCount: int("maxIntervalBackupCount").get(c),
    maxTimestampBackupCount: int("maxTimestampBackupCount").get(c),
    taskStatus: c.view.row.backupTaskStatus,
    taskErrorDetail: c.view.row.backupTaskErrorDetail,
  })),

  // Read-only fields of v3 only. Keelson has no Mesos/Swarm, debug mode, IPv6 or spot workers:
  // those read as off, and the spot counts as "0" (a count, not an unset value).
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
  monitoring: text((c) => ((FIELDS.enableCatapultMonitoring as ReadField).get(c) ? "true" : "false")),
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
};

/** §2.1 fields returned by both reads, in the table's order. */
const SPEC_READ_COMMON = [
  "name",
  "nodePoolUuid",
  "numMasters",
  "numWorkers",
  "numMinWorkers",
  "numMaxWorkers",
  "allowWorkloadsOnMaster",
  "privileged",
  "appCatalogEnabled",
  "ami",
  "customAmi",
  "azs",
  "region",
  "masterFlavor",
  "workerFlavor",
  "sshKey",
  "domainId",
  "serviceFqdn",
  "externalDnsName",
  "useVendorDomain",
  "vpc",
  "subnets",
  "privateSubnets",
  "isPrivate",
  "internalElb",
  "httpProxy",
  "containersCidr",
  "servicesCidr",
  "runtimeConfig",
  "k8sApiPort",
  "masterVipIpv4",
  "masterVipIface",
  "masterVipVrouterId",
  "enableMetallb",
  "metallbCidr",
  "networkPlugin",
  "calicoV4BlockSize",
  "calicoIpIpMode",
  "calicoNatOutgoing",
  "calicoNodeCpuLimit",
  "calicoNodeMemoryLimit",
  "calicoTyphaCpuLimit",
  "calicoTyphaMemoryLimit",
  "calicoControllerCpuLimit",
  "calicoControllerMemoryLimit",
  "mtuSize",
  "dockerLiveRestoreEnabled",
  "isEtcdBackupEnabled",
  "intervalInMins",
  "intervalInHours",
  "dailyBackupTime",
  "maxIntervalBackupCount",
  "maxTimestampBackupCount",
  "storageType",
  "localPath",
  "tags",
  "kubeRoleVersion",
  "cpuManagerPolicy",
  "topologyManagerPolicy",
  "reservedCPUs",
  "dockerPrivateRegistry",
  "quayPrivateRegistry",
  "gcrPrivateRegistry",
  "k8sPrivateRegistry",
  "useHostname",
  "enableProfileAgent",
  "dockerCentosPackageRepoUrl",
  "dockerUbuntuPackageRepoUrl",
  "containerRuntime",
  "certExpiryHrs",
  "addonOperatorImageTag",
  "addonVersions",
] as const;

/** "Read-only fields returned in v3 and v4 reads" (enableEtcdEncryption is v4 only). */
const READ_ONLY_COMMON = [
  "uuid",
  "projectId",
  "isKubernetes",
  "masterIp",
  "status",
  "masterStatus",
  "workerStatus",
  "flannelIfaceLabel",
  "flannelPublicIfaceLabel",
  "dockerRoot",
  "etcdDataDir",
  "lastOp",
  "lastOk",
  "keystoneEnabled",
  "authzEnabled",
  "taskStatus",
  "taskError",
  "taskErrorDetail",
  "nodePoolName",
  "cloudProviderUuid",
  "cloudProviderName",
  "cloudProviderType",
  "canUpgrade",
] as const;

export const CLUSTER_READ_KEYS_V4: readonly string[] = Object.freeze([
  ...SPEC_READ_COMMON,
  ...READ_ONLY_COMMON,
  "enableEtcdEncryption",
  // Compatibility: the backup settings nested, with the backup job's own taskStatus.
  "etcdBackup",
]);

export const CLUSTER_READ_KEYS_V3: readonly string[] = Object.freeze([
  ...SPEC_READ_COMMON,
  // Notes of §2.1: returned by v3 read, not by v4 read.
  "enableCAS",
  "enableCatapultMonitoring",
  // "Fields accepted by v3 create only": v3 read returns all but additionalAWSDiskSize.
  "deployVendorOperator",
  "deployKubevirt",
  "etcdHeartbeatIntervalMs",
  "etcdElectionTimeoutMs",
  "masterless",
  ...READ_ONLY_COMMON,
  // "Read-only fields returned by v3 read only".
  "isMesos",
  "isSwarm",
  "debug",
  "ipv6",
  "canMinorUpgrade",
  "minorUpgradeRoleVersion",
  "canPatchUpgrade",
  "patchUpgradeRoleVersion",
  "upgradingTo",
  "kubeProxyMode",
  "apiserverStorageBackend",
  "monitoring",
  "numSpotWorkers",
  "spotWorkerFlavor",
  "spotPrice",
  "numMaxSpotWorkers",
  "calicoIPv4",
  "calicoIPv4DetectionMethod",
  "calicoIPv6",
  "calicoIPv6DetectionMethod",
  "calicoIPv6PoolCidr",
  "calicoIPv6PoolBlockSize",
  "calicoIPv6PoolNatOutgoing",
  "felixIPv6Support",
  "etcdVersion",
]);

function present(view: ClusterView, version: ApiVersion, keys: readonly string[]): Record<string, unknown> {
  const spec = isPlainObject(view.row.spec) ? view.row.spec : {};
  const ctx: Ctx = { view, spec, version };
  const out: Record<string, unknown> = {};
  for (const key of keys) out[key] = (FIELDS[key] as ReadField).get(ctx);
  return out;
}

export function presentClusterV4(view: ClusterView): Record<string, unknown> {
  return present(view, "v4", CLUSTER_READ_KEYS_V4);
}

export function presentClusterV3(view: ClusterView): Record<string, unknown> {
  return present(view, "v3", CLUSTER_READ_KEYS_V3);
}

/** The wire type of a read key (read-schema.ts); throws for a key no read has. */
export function readTypeOf(key: string): ReadType {
  const found = FIELDS[key];
  if (!found) throw new Error(`presenters: no read field ${key}`);
  return found.type;
}
