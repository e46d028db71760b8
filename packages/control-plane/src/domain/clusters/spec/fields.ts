/**
 * The cluster create/update fields of spec §2.1, one entry per field: its stored type, in which
 * version's create and update it is accepted (the C and U columns and their notes, plus the
 * "Fields accepted by v3 create only" paragraph), and its single-value rules (§8).
 *
 * "Not set" on input: `null`, `""` for strings and numeric strings, `[]` and `{}` for lists
 * and maps, and `0` for the integers whose 0 is not a meaningful value (backup intervals and
 * counts, etcd timings). Those are exactly what a read shows for an unset field, and what Go
 * clients send for fields they leave empty, so a client can send back what it read. On create
 * they leave the field unset; on update they clear it (a field with a default gets the default).
 */
import { badRequest } from "../../../http/errors.ts";
import {
  type Range,
  toBoolean,
  toFlag,
  toInteger,
  toNumericString,
  toStringArray,
  toStringMap,
  toStringValue,
} from "./coerce.ts";
import {
  checkAbsolutePath,
  checkCidrSyntax,
  checkDailyTime,
  checkHostname,
  checkHttpUrl,
  checkInterfaceName,
  checkIPv4,
  checkMetallbCidr,
  checkNoControlChars,
  checkOneOf,
  checkQuantity,
  checkReservedCpus,
  checkToken,
} from "./formats.ts";
import type { ApiVersion, ClusterSpec } from "./spec.ts";

export type FieldKind = "string" | "integer" | "flag" | "boolean" | "numericString" | "stringArray" | "stringMap";

export interface FieldDef {
  kind: FieldKind;
  /** C column: accepted on create by both versions, one of them, or neither. */
  create: "both" | "v4" | "v3" | "none";
  /** U column. */
  update: "both" | "v4" | "none";
  /** Booleans only: also "true"/"false", because the read returns the field as that string. */
  textBoolean?: boolean;
  /** Integers only: a client's 0 means "not set" (see the module comment). */
  zeroIsUnset?: boolean;
  /** Integers and numeric strings; integers default to `{ min: 0 }`. */
  range?: Range;
  maxLength?: number;
  /** Format rule of a (non-empty) string value. */
  check?: (value: string, path: string) => void;
}

export const NETWORK_PLUGINS = ["flannel", "calico", "noop", "weave"] as const;
export const CALICO_IPIP_MODES = ["Always", "Never", "CrossSubnet"] as const;
export const CPU_MANAGER_POLICIES = ["none", "static"] as const;
export const TOPOLOGY_MANAGER_POLICIES = ["none", "best-effort", "restricted", "single-numa-node"] as const;
export const CONTAINER_RUNTIMES = ["docker", "containerd"] as const;
export const BACKUP_STORAGE_TYPES = ["local"] as const;

/** Long enough for any SSH public key or runtime-config string a person writes; bounds the row size. */
const MAX_STRING = 16_384;
const NAME_MAX = 255;
/** etcd refuses an election timeout above 50 s (its maxElectionMs). */
export const ETCD_MAX_ELECTION_MS = 50_000;
/** 100 years: beyond that a certificate's notAfter overflows what X.509 tools handle. */
export const CERT_EXPIRY_MAX_HRS = 876_000;

function checkName(value: string, path: string): void {
  checkNoControlChars(value, path);
  if (value.trim() === "") throw badRequest(path, `${path} must not be blank`);
}

const str = (create: FieldDef["create"], check?: FieldDef["check"], update: FieldDef["update"] = "none"): FieldDef =>
  check ? { kind: "string", create, update, check } : { kind: "string", create, update };
const int = (create: FieldDef["create"], update: FieldDef["update"], range: Range, zeroIsUnset = false): FieldDef => ({
  kind: "integer",
  create,
  update,
  range,
  zeroIsUnset,
});
const bool = (create: FieldDef["create"], update: FieldDef["update"] = "none"): FieldDef => ({
  kind: "boolean",
  create,
  update,
});
const flag = (create: FieldDef["create"]): FieldDef => ({ kind: "flag", create, update: "none" });
const list = (create: FieldDef["create"]): FieldDef => ({ kind: "stringArray", create, update: "none" });
const numeric = (range: Range): FieldDef => ({ kind: "numericString", create: "both", update: "none", range });

export const CLUSTER_FIELDS: { readonly [K in keyof ClusterSpec]-?: FieldDef } = {
  name: { kind: "string", create: "both", update: "none", maxLength: NAME_MAX, check: checkName },
  nodePoolUuid: str("both", checkToken),
  numMasters: int("both", "none", { min: 0 }),
  numWorkers: int("both", "both", { min: 0 }),
  enableCAS: bool("both"),
  numMinWorkers: int("both", "both", { min: 0 }),
  numMaxWorkers: int("both", "both", { min: 0 }),
  allowWorkloadsOnMaster: flag("both"),
  privileged: bool("both"),
  appCatalogEnabled: flag("both"),
  ami: str("both"),
  customAmi: str("none", undefined, "both"),
  azs: list("both"),
  region: str("both"),
  masterFlavor: str("both"),
  workerFlavor: str("both"),
  sshKey: str("both"),
  domainId: str("both"),
  serviceFqdn: str("both", checkHostname),
  externalDnsName: str("both", checkHostname),
  // "boolean in create, string in read": the read's "true"/"false" is accepted back.
  useVendorDomain: { kind: "boolean", create: "both", update: "none", textBoolean: true },
  vpc: str("both", checkToken),
  subnets: list("both"),
  privateSubnets: list("both"),
  isPrivate: bool("both"),
  internalElb: bool("both"),
  httpProxy: str("both", checkToken),
  containersCidr: str("both", checkCidrSyntax),
  servicesCidr: str("both", checkCidrSyntax),
  runtimeConfig: str("both"),
  k8sApiPort: numeric({ min: 1, max: 65_535 }),
  masterVipIpv4: str("both", checkIPv4),
  masterVipIface: str("both", checkInterfaceName),
  enableMetallb: bool("both"),
  metallbCidr: str("both", checkMetallbCidr),
  networkPlugin: str("both", checkOneOf(NETWORK_PLUGINS)),
  calicoV4BlockSize: numeric({ min: 20, max: 32 }),
  calicoIpIpMode: str("both", checkOneOf(CALICO_IPIP_MODES)),
  calicoNatOutgoing: bool("both"),
  calicoNodeCpuLimit: str("both", checkQuantity),
  calicoNodeMemoryLimit: str("both", checkQuantity),
  calicoTyphaCpuLimit: str("both", checkQuantity),
  calicoTyphaMemoryLimit: str("both", checkQuantity),
  calicoControllerCpuLimit: str("both", checkQuantity),
  calicoControllerMemoryLimit: str("both", checkQuantity),
  mtuSize: numeric({ min: 576, max: 9000 }),
  dockerLiveRestoreEnabled: bool("both"),
  isEtcdBackupEnabled: bool("both", "both"),
  intervalInMins: int("both", "both", { min: 1 }, true),
  intervalInHours: int("both", "both", { min: 1 }, true),
  dailyBackupTime: str("both", checkDailyTime, "both"),
  maxIntervalBackupCount: int("both", "both", { min: 1 }, true),
  maxTimestampBackupCount: int("both", "both", { min: 1 }, true),
  storageType: str("both", checkOneOf(BACKUP_STORAGE_TYPES), "both"),
  localPath: str("both", checkAbsolutePath, "both"),
  tags: { kind: "stringMap", create: "both", update: "both" },
  kubeRoleVersion: str("both", checkToken),
  cpuManagerPolicy: str("v4", checkOneOf(CPU_MANAGER_POLICIES)),
  topologyManagerPolicy: str("v4", checkOneOf(TOPOLOGY_MANAGER_POLICIES)),
  reservedCPUs: str("v4", checkReservedCpus),
  dockerPrivateRegistry: str("v4", checkToken),
  quayPrivateRegistry: str("v4", checkToken),
  gcrPrivateRegistry: str("v4", checkToken),
  k8sPrivateRegistry: str("v4", checkToken),
  useHostname: bool("v4"),
  // The U column has no "(v4 only)" note for this field, unlike its C column: both versions update it.
  enableProfileAgent: bool("v4", "both"),
  enableCatapultMonitoring: bool("v4"),
  dockerCentosPackageRepoUrl: str("v4", checkHttpUrl, "v4"),
  dockerUbuntuPackageRepoUrl: str("v4", checkHttpUrl, "v4"),
  containerRuntime: str("both", checkOneOf(CONTAINER_RUNTIMES)),
  certExpiryHrs: int("both", "both", { min: 1, max: CERT_EXPIRY_MAX_HRS }),
  addonOperatorImageTag: str("both", checkToken, "v4"),
  addonVersions: { kind: "stringMap", create: "both", update: "none" },
  // "Fields accepted by v3 create only".
  deployVendorOperator: flag("v3"),
  deployKubevirt: flag("v3"),
  etcdHeartbeatIntervalMs: int("v3", "none", { min: 1 }, true),
  etcdElectionTimeoutMs: int("v3", "none", { min: 1, max: ETCD_MAX_ELECTION_MS }, true),
  masterless: bool("v3"),
  additionalAWSDiskSize: int("v3", "none", { min: 0 }),
};

export type SpecField = keyof ClusterSpec;

export function isSpecField(name: string): name is SpecField {
  return Object.hasOwn(CLUSTER_FIELDS, name);
}

export function acceptedOnCreate(field: SpecField, version: ApiVersion): boolean {
  const set = CLUSTER_FIELDS[field].create;
  return set === "both" || set === version;
}

export function acceptedOnUpdate(field: SpecField, version: ApiVersion): boolean {
  const set = CLUSTER_FIELDS[field].update;
  return set === "both" || set === version;
}

/**
 * One client value of `field` in its stored type, or `undefined` for "not set" (module
 * comment). `path` is how the client named it, for the error message.
 */
export function normaliseField(field: SpecField, raw: unknown, path: string): unknown {
  const def = CLUSTER_FIELDS[field];
  if (raw === null || raw === undefined) return undefined;
  switch (def.kind) {
    case "string": {
      const value = toStringValue(raw, path, def.maxLength ?? MAX_STRING);
      if (value === "") return undefined;
      def.check?.(value, path);
      return value;
    }
    case "integer":
      if (def.zeroIsUnset && raw === 0) return undefined;
      return toInteger(raw, path, def.range ?? { min: 0 });
    case "flag":
      return toFlag(raw, path);
    case "boolean":
      return toBoolean(raw, path, def.textBoolean === true);
    case "numericString":
      if (raw === "") return undefined;
      return toNumericString(raw, path, def.range ?? {});
    case "stringArray": {
      const value = toStringArray(raw, path, MAX_STRING);
      return value.length === 0 ? undefined : value;
    }
    case "stringMap": {
      const value = toStringMap(raw, path, MAX_STRING);
      return Object.keys(value).length === 0 ? undefined : value;
    }
  }
}
