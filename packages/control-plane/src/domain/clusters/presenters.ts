/**
 * Stored cluster -> the v4 and v3 read records: exactly the read set of each version (§2.1 and
 * its read-only tables), with the read-direction types.
 *
 * Values of fields that are not set, chosen once for every field so clients can rely on them:
 * strings "", integers 0, booleans false, lists [], objects {}; except `upgradingTo`, null as
 * the spec says, and the fields with a default (§8), which read as their default. A field
 * typed integer-on-read (privileged, the 0/1 flags, v3 calicoNatOutgoing) reads 1/0;
 * `useVendorDomain` reads "true"/"false".
 */
import type { clusters } from "@keelson/db";
import { isPlainObject } from "./coerce.ts";
import { SPEC_DEFAULTS } from "./rules.ts";
import type { ApiVersion, ClusterSpec } from "./spec.ts";

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

const str =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) => {
    const value = spec[field];
    return typeof value === "string" ? value : "";
  };
const int =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) => {
    const value = spec[field];
    return typeof value === "number" ? value : 0;
  };
/** Tolerates either stored type, so a spec written by an older parser still reads right. */
const isOn = (spec: Record<string, unknown>, field: keyof ClusterSpec): boolean =>
  spec[field] === true || spec[field] === 1;
const bool =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) =>
    isOn(spec, field);
const flag =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) =>
    isOn(spec, field) ? 1 : 0;
const list =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) => {
    const value = spec[field];
    return Array.isArray(value) ? value : [];
  };
const map =
  (field: keyof ClusterSpec): Getter =>
  ({ spec }) => {
    const value = spec[field];
    return isPlainObject(value) ? value : {};
  };
const withDefault =
  (field: keyof typeof SPEC_DEFAULTS): Getter =>
  ({ spec }) =>
    spec[field] ?? SPEC_DEFAULTS[field];
const fixed =
  (value: unknown): Getter =>
  () =>
    value;

const isCalico = (spec: Record<string, unknown>) => (spec.networkPlugin ?? SPEC_DEFAULTS.networkPlugin) === "calico";
const canUpgrade = ({ view }: Ctx) => view.upgrade.patch !== null || view.upgrade.minor !== null;

const GETTERS: Record<string, Getter> = {
  // §2.1 fields. name and kubeRoleVersion come from the typed columns: an upgrade moves the
  // role version there, and the column is what the unique index guards for the name.
  name: ({ view }) => view.row.name,
  nodePoolUuid: ({ view }) => view.nodePool.uuid,
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
  useVendorDomain: ({ spec }) => (isOn(spec, "useVendorDomain") ? "true" : "false"),
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
  masterVipVrouterId: ({ view }) => view.row.masterVipVrouterId,
  enableMetallb: bool("enableMetallb"),
  metallbCidr: str("metallbCidr"),
  networkPlugin: withDefault("networkPlugin"),
  calicoV4BlockSize: str("calicoV4BlockSize"),
  calicoIpIpMode: str("calicoIpIpMode"),
  // Boolean in v4 create and read, integer in v3 read (§2.1).
  calicoNatOutgoing: ({ spec, version }) => {
    const on = isOn(spec, "calicoNatOutgoing");
    return version === "v4" ? on : on ? 1 : 0;
  },
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
  kubeRoleVersion: ({ view }) => view.row.kubeRoleVersion,
  cpuManagerPolicy: withDefault("cpuManagerPolicy"),
  topologyManagerPolicy: withDefault("topologyManagerPolicy"),
  reservedCPUs: str("reservedCPUs"),
  dockerPrivateRegistry: str("dockerPrivateRegistry"),
  quayPrivateRegistry: str("quayPrivateRegistry"),
  gcrPrivateRegistry: str("gcrPrivateRegistry"),
  k8sPrivateRegistry: str("k8sPrivateRegistry"),
  useHostname: bool("useHostname"),
  enableProfileAgent: bool("enableProfileAgent"),
  enableCatapultMonitoring: ({ spec }) =>
    spec.enableCatapultMonitoring === undefined
      ? SPEC_DEFAULTS.enableCatapultMonitoring
      : isOn(spec, "enableCatapultMonitoring"),
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
  uuid: ({ view }) => view.row.id,
  projectId: ({ view }) => view.row.projectId,
  isKubernetes: fixed(1),
  // Applies only to OpenStack providers, which Keelson does not have.
  masterIp: fixed(""),
  status: ({ view }) => view.row.status,
  masterStatus: ({ view }) => view.masterStatus,
  workerStatus: ({ view }) => view.workerStatus,
  flannelIfaceLabel: fixed(""),
  flannelPublicIfaceLabel: fixed(""),
  dockerRoot: ({ spec }) => (spec.containerRuntime === "docker" ? "/var/lib/docker" : "/var/lib/containerd"),
  etcdDataDir: fixed("/var/lib/etcd"),
  lastOp: ({ view }) => view.row.lastOp,
  lastOk: ({ view }) => view.row.lastOk ?? "",
  keystoneEnabled: fixed(1),
  authzEnabled: fixed(1),
  taskStatus: ({ view }) => view.row.taskStatus,
  taskError: ({ view }) => view.row.taskError,
  // The backup job's detail; its `taskStatus` (the spec's second one) is in v4's etcdBackup.
  taskErrorDetail: ({ view }) => view.row.backupTaskErrorDetail,
  nodePoolName: ({ view }) => view.nodePool.name,
  cloudProviderUuid: ({ view }) => view.cloudProvider.uuid,
  cloudProviderName: ({ view }) => view.cloudProvider.name,
  cloudProviderType: ({ view }) => view.cloudProvider.type,
  canUpgrade,
  enableEtcdEncryption: fixed("false"),
  etcdBackup: (c) => ({
    isEtcdBackupEnabled: flag("isEtcdBackupEnabled")(c),
    storageType: str("storageType")(c),
    storageProperties: { localPath: str("localPath")(c) },
    intervalInMins: int("intervalInMins")(c),
    intervalInHours: int("intervalInHours")(c),
    dailyBackupTime: str("dailyBackupTime")(c),
    maxIntervalBackupCount: int("maxIntervalBackupCount")(c),
    maxTimestampBackupCount: int("maxTimestampBackupCount")(c),
    taskStatus: c.view.row.backupTaskStatus,
    taskErrorDetail: c.view.row.backupTaskErrorDetail,
  }),

  // Read-only fields of v3 only. Keelson has no Mesos/Swarm, debug mode, IPv6 or spot workers:
  // those read as off, and the spot counts as "0" (a count, not an unset value).
  isMesos: fixed(0),
  isSwarm: fixed(0),
  debug: fixed(false),
  ipv6: fixed(false),
  canMinorUpgrade: ({ view }) => (view.upgrade.minor !== null ? 1 : 0),
  minorUpgradeRoleVersion: ({ view }) => view.upgrade.minor ?? "",
  canPatchUpgrade: ({ view }) => (view.upgrade.patch !== null ? 1 : 0),
  patchUpgradeRoleVersion: ({ view }) => view.upgrade.patch ?? "",
  upgradingTo: ({ view }) => view.row.upgradingTo ?? null,
  kubeProxyMode: fixed("iptables"),
  apiserverStorageBackend: fixed("etcd3"),
  monitoring: (c) => ((GETTERS.enableCatapultMonitoring as Getter)(c) ? "true" : "false"),
  numSpotWorkers: fixed("0"),
  spotWorkerFlavor: fixed(""),
  spotPrice: fixed(""),
  numMaxSpotWorkers: fixed("0"),
  // Calico's address detection as Keelson configures it; empty when Calico is not the plugin.
  calicoIPv4: ({ spec }) => (isCalico(spec) ? "autodetect" : ""),
  calicoIPv4DetectionMethod: ({ spec }) => (isCalico(spec) ? "first-found" : ""),
  calicoIPv6: ({ spec }) => (isCalico(spec) ? "none" : ""),
  calicoIPv6DetectionMethod: fixed(""),
  calicoIPv6PoolCidr: fixed(""),
  calicoIPv6PoolBlockSize: fixed(""),
  calicoIPv6PoolNatOutgoing: fixed(0),
  felixIPv6Support: fixed(false),
  etcdVersion: ({ view }) => view.etcdVersion ?? "",
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
  for (const key of keys) out[key] = (GETTERS[key] as Getter)(ctx);
  return out;
}

export function presentClusterV4(view: ClusterView): Record<string, unknown> {
  return present(view, "v4", CLUSTER_READ_KEYS_V4);
}

export function presentClusterV3(view: ClusterView): Record<string, unknown> {
  return present(view, "v3", CLUSTER_READ_KEYS_V3);
}
