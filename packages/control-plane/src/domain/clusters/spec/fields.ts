/**
 * The cluster fields of spec §2.1, one entry per field: the one place a field is declared. Each
 * entry gives its stored type (from which `ClusterSpec`, the stored spec's type, is derived), in
 * which version's create and update it is accepted (the C and U columns and their notes, plus
 * the "Fields accepted by v3 create only" paragraph), which versions' reads return it and as
 * what type, its §8 default, its path in the nested `etcdBackup` object, and its single-value
 * rules (§8). Parsing (spec.ts), defaults (rules.ts), the read records and their response
 * schemas (present/) are all derived from this table, so adding a field is one entry here.
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
  checkProxy,
  checkQuantity,
  checkReservedCpus,
  checkToken,
} from "./formats.ts";

export type ApiVersion = "v3" | "v4";

export type FieldKind = "string" | "integer" | "flag" | "boolean" | "numericString" | "stringArray" | "stringMap";

/**
 * How a read shows a field whose read type differs from its stored type (§2.1): `flag` a
 * boolean as 1/0, `text` a boolean as "true"/"false", `natOutgoing` a boolean in v4 and 1/0 in v3.
 */
export type ReadAs = "flag" | "text" | "natOutgoing";

/**
 * One field. `T` is its stored value type; `Filled` says a stored spec always has it (it is
 * required, has a default, or is resolved when parsed), which makes it a required key of
 * `ClusterSpec`.
 */
export interface FieldDef<T = unknown, Filled extends boolean = boolean> {
  kind: FieldKind;
  /** C column: accepted on create by both versions, one of them, or neither. */
  create: "both" | "v4" | "v3" | "none";
  /** U column. */
  update: "both" | "v4" | "none";
  /** Which reads return it (§2.1 notes; the read-only fields are in present/presenters.ts). */
  read: "both" | "v3" | "none";
  readAs?: ReadAs;
  /** Its path inside the nested `etcdBackup` object clients also send. */
  nested?: string;
  /** §8 default (or the §2.1 row's "Default"): stored when the client leaves the field unset. */
  default?: T;
  filled: Filled;
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

type Check = (value: string, path: string) => void;

/** Where a field is accepted and read. Unsaid: created by both, never updated, read like created. */
interface Where {
  create?: FieldDef["create"];
  update?: FieldDef["update"];
  /** Defaults to what create says: a v3-only field reads in v3 only, any other in both. */
  read?: FieldDef["read"];
  readAs?: ReadAs;
  nested?: string;
}

function def<T>(kind: FieldKind, where: Where, rules: Partial<FieldDef<T>> = {}): FieldDef<T, false> {
  const create = where.create ?? "both";
  const entry: FieldDef<T, false> = {
    ...rules,
    kind,
    create,
    update: where.update ?? "none",
    read: where.read ?? (create === "v3" ? "v3" : "both"),
    filled: false,
  };
  if (where.readAs) entry.readAs = where.readAs;
  if (where.nested) entry.nested = where.nested;
  return entry;
}

const text = (where: Where = {}, check?: Check): FieldDef<string, false> =>
  def<string>("string", where, check ? { check } : {});
const choice = <const V extends readonly string[]>(values: V, where: Where = {}): FieldDef<V[number], false> =>
  def<V[number]>("string", where, { check: checkOneOf(values) });
const integer = (range: Range, where: Where = {}, zeroIsUnset = false): FieldDef<number, false> =>
  def<number>("integer", where, { range, zeroIsUnset });
const boolean = (where: Where = {}): FieldDef<boolean, false> => def<boolean>("boolean", where);
const flag = (where: Where = {}): FieldDef<0 | 1, false> => def<0 | 1>("flag", where);
const digits = (range: Range): FieldDef<string, false> => def<string>("numericString", {}, { range });
const strings = (): FieldDef<string[], false> => def<string[]>("stringArray", {});
const stringMap = (where: Where = {}): FieldDef<Record<string, string>, false> =>
  def<Record<string, string>>("stringMap", where);

/** A field every stored spec has: required, or resolved when parsed (spec.ts). */
const filled = <T>(field: FieldDef<T, false>): FieldDef<T, true> => ({ ...field, filled: true });
const withDefault = <T>(field: FieldDef<T, false>, value: NoInfer<T>): FieldDef<T, true> & { default: T } => ({
  ...field,
  default: value,
  filled: true,
});

export const CLUSTER_FIELDS = {
  name: filled(def<string>("string", {}, { maxLength: NAME_MAX, check: checkName })),
  nodePoolUuid: text({}, checkToken),
  numMasters: integer({ min: 0 }),
  numWorkers: integer({ min: 0 }, { update: "both" }),
  // §2.1 notes: enableCAS is returned by the v3 read, not by the v4 read.
  enableCAS: boolean({ read: "v3" }),
  numMinWorkers: integer({ min: 0 }, { update: "both" }),
  numMaxWorkers: integer({ min: 0 }, { update: "both" }),
  allowWorkloadsOnMaster: flag(),
  // Boolean in create, integer in read.
  privileged: boolean({ readAs: "flag" }),
  appCatalogEnabled: flag(),
  ami: text(),
  customAmi: text({ create: "none", update: "both", read: "both" }),
  azs: strings(),
  region: text(),
  masterFlavor: text(),
  workerFlavor: text(),
  sshKey: text(),
  domainId: text(),
  serviceFqdn: text({}, checkHostname),
  externalDnsName: text({}, checkHostname),
  // "boolean in create, string in read": the read's "true"/"false" is accepted back.
  useVendorDomain: { ...boolean({ readAs: "text" }), textBoolean: true },
  vpc: text({}, checkToken),
  subnets: strings(),
  privateSubnets: strings(),
  isPrivate: boolean(),
  internalElb: boolean(),
  httpProxy: text({}, checkProxy),
  containersCidr: text({}, checkCidrSyntax),
  servicesCidr: text({}, checkCidrSyntax),
  runtimeConfig: text(),
  k8sApiPort: withDefault(digits({ min: 1, max: 65_535 }), "443"),
  masterVipIpv4: text({}, checkIPv4),
  masterVipIface: text({}, checkInterfaceName),
  // The §2.1 row says "Default 0".
  enableMetallb: withDefault(boolean(), false),
  metallbCidr: text({}, checkMetallbCidr),
  networkPlugin: withDefault(choice(NETWORK_PLUGINS), "flannel"),
  calicoV4BlockSize: digits({ min: 20, max: 32 }),
  calicoIpIpMode: choice(CALICO_IPIP_MODES),
  // Boolean in v4 create and read, integer in v3 read.
  calicoNatOutgoing: boolean({ readAs: "natOutgoing" }),
  calicoNodeCpuLimit: text({}, checkQuantity),
  calicoNodeMemoryLimit: text({}, checkQuantity),
  calicoTyphaCpuLimit: text({}, checkQuantity),
  calicoTyphaMemoryLimit: text({}, checkQuantity),
  calicoControllerCpuLimit: text({}, checkQuantity),
  calicoControllerMemoryLimit: text({}, checkQuantity),
  mtuSize: digits({ min: 576, max: 9000 }),
  dockerLiveRestoreEnabled: boolean(),
  isEtcdBackupEnabled: boolean({ update: "both", nested: "etcdBackup.isEtcdBackupEnabled" }),
  intervalInMins: integer({ min: 1 }, { update: "both", nested: "etcdBackup.intervalInMins" }, true),
  intervalInHours: integer({ min: 1 }, { update: "both", nested: "etcdBackup.intervalInHours" }, true),
  dailyBackupTime: text({ update: "both", nested: "etcdBackup.dailyBackupTime" }, checkDailyTime),
  maxIntervalBackupCount: integer({ min: 1 }, { update: "both", nested: "etcdBackup.maxIntervalBackupCount" }, true),
  maxTimestampBackupCount: integer({ min: 1 }, { update: "both", nested: "etcdBackup.maxTimestampBackupCount" }, true),
  storageType: choice(BACKUP_STORAGE_TYPES, { update: "both", nested: "etcdBackup.storageType" }),
  localPath: text({ update: "both", nested: "etcdBackup.storageProperties.localPath" }, checkAbsolutePath),
  tags: stringMap({ update: "both" }),
  // Resolved from the catalogue when not given (spec.ts).
  kubeRoleVersion: filled(text({}, checkToken)),
  cpuManagerPolicy: withDefault(choice(CPU_MANAGER_POLICIES, { create: "v4" }), "none"),
  topologyManagerPolicy: withDefault(choice(TOPOLOGY_MANAGER_POLICIES, { create: "v4" }), "none"),
  reservedCPUs: text({ create: "v4" }, checkReservedCpus),
  dockerPrivateRegistry: text({ create: "v4" }, checkToken),
  quayPrivateRegistry: text({ create: "v4" }, checkToken),
  gcrPrivateRegistry: text({ create: "v4" }, checkToken),
  k8sPrivateRegistry: text({ create: "v4" }, checkToken),
  useHostname: boolean({ create: "v4" }),
  // The U column has no "(v4 only)" note for this field, unlike its C column: both versions update it.
  enableProfileAgent: boolean({ create: "v4", update: "both" }),
  // §2.1 notes: created by v4, returned by the v3 read only.
  enableCatapultMonitoring: withDefault(boolean({ create: "v4", read: "v3" }), true),
  dockerCentosPackageRepoUrl: text({ create: "v4", update: "v4" }, checkHttpUrl),
  dockerUbuntuPackageRepoUrl: text({ create: "v4", update: "v4" }, checkHttpUrl),
  // Resolved from the runtime of the cluster's role version in the catalogue when not given.
  containerRuntime: filled(choice(CONTAINER_RUNTIMES)),
  certExpiryHrs: withDefault(integer({ min: 1, max: CERT_EXPIRY_MAX_HRS }, { update: "both" }), 24),
  addonOperatorImageTag: text({ update: "v4" }, checkToken),
  addonVersions: stringMap(),
  // "Fields accepted by v3 create only": the v3 read returns all but additionalAWSDiskSize.
  deployVendorOperator: flag({ create: "v3" }),
  deployKubevirt: flag({ create: "v3" }),
  etcdHeartbeatIntervalMs: integer({ min: 1 }, { create: "v3" }, true),
  etcdElectionTimeoutMs: integer({ min: 1, max: ETCD_MAX_ELECTION_MS }, { create: "v3" }, true),
  masterless: boolean({ create: "v3" }),
  additionalAWSDiskSize: integer({ min: 0 }, { create: "v3", read: "none" }),
} as const satisfies Record<string, FieldDef>;

type Fields = typeof CLUSTER_FIELDS;
type ValueOf<F> = F extends FieldDef<infer T> ? T : never;
type FilledField = { [K in keyof Fields]: Fields[K] extends { filled: true } ? K : never }[keyof Fields];
type DefaultedField = { [K in keyof Fields]: Fields[K] extends { default: unknown } ? K : never }[keyof Fields];

/**
 * The stored spec: every create/update field of either version in one type (0/1 integer fields
 * as 0|1, booleans as boolean, numeric strings as canonical decimal strings, the etcd backup
 * settings as the flat fields). Filled fields are always present; the others only when set.
 */
export type ClusterSpec = { [K in FilledField]: ValueOf<Fields[K]> } & {
  [K in Exclude<keyof Fields, FilledField>]?: ValueOf<Fields[K]>;
};

// The spec column's type (packages/db declares the interface, this table fills it).
declare module "@keelson/db" {
  interface StoredClusterSpec extends ClusterSpec {}
}

/** The §8 defaults, from the table. */
export const SPEC_DEFAULTS = Object.freeze(
  Object.fromEntries(
    Object.entries(CLUSTER_FIELDS).flatMap(([name, field]) =>
      "default" in field ? [[name, (field as FieldDef).default]] : [],
    ),
  ),
) as { readonly [K in DefaultedField]: ValueOf<Fields[K]> };

export type SpecField = keyof Fields;

export function isSpecField(name: string): name is SpecField {
  return Object.hasOwn(CLUSTER_FIELDS, name);
}

export function acceptedOnCreate(field: SpecField, version: ApiVersion): boolean {
  const set: FieldDef["create"] = CLUSTER_FIELDS[field].create;
  return set === "both" || set === version;
}

export function acceptedOnUpdate(field: SpecField, version: ApiVersion): boolean {
  const set: FieldDef["update"] = CLUSTER_FIELDS[field].update;
  return set === "both" || set === version;
}

/**
 * One client value of `field` in its stored type, or `undefined` for "not set" (module
 * comment). `path` is how the client named it, for the error message.
 */
export function normaliseField(field: SpecField, raw: unknown, path: string): unknown {
  const def: FieldDef = CLUSTER_FIELDS[field];
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
