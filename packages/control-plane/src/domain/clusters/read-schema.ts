/**
 * TypeBox schemas of the v4 and v3 cluster read records, for route response schemas and the
 * OpenAPI document. They list exactly CLUSTER_READ_KEYS_V4/V3 with the read types the
 * presenters produce (the presenter tests check the two against each other), so a response
 * serialiser built from them neither drops nor retypes a field.
 */
import { type TSchema, Type } from "typebox";
import { CLUSTER_READ_KEYS_V3, CLUSTER_READ_KEYS_V4 } from "./presenters.ts";
import type { ApiVersion } from "./spec.ts";

const S = () => Type.String();
const I = () => Type.Integer();
const B = () => Type.Boolean();

const STRING_KEYS = [
  "name",
  "nodePoolUuid",
  "ami",
  "customAmi",
  "region",
  "masterFlavor",
  "workerFlavor",
  "sshKey",
  "domainId",
  "serviceFqdn",
  "externalDnsName",
  "useVendorDomain",
  "vpc",
  "httpProxy",
  "containersCidr",
  "servicesCidr",
  "runtimeConfig",
  "k8sApiPort",
  "masterVipIpv4",
  "masterVipIface",
  "masterVipVrouterId",
  "metallbCidr",
  "networkPlugin",
  "calicoV4BlockSize",
  "calicoIpIpMode",
  "calicoNodeCpuLimit",
  "calicoNodeMemoryLimit",
  "calicoTyphaCpuLimit",
  "calicoTyphaMemoryLimit",
  "calicoControllerCpuLimit",
  "calicoControllerMemoryLimit",
  "mtuSize",
  "dailyBackupTime",
  "storageType",
  "localPath",
  "kubeRoleVersion",
  "cpuManagerPolicy",
  "topologyManagerPolicy",
  "reservedCPUs",
  "dockerPrivateRegistry",
  "quayPrivateRegistry",
  "gcrPrivateRegistry",
  "k8sPrivateRegistry",
  "dockerCentosPackageRepoUrl",
  "dockerUbuntuPackageRepoUrl",
  "containerRuntime",
  "addonOperatorImageTag",
  "uuid",
  "projectId",
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
  "taskStatus",
  "taskError",
  "taskErrorDetail",
  "nodePoolName",
  "cloudProviderUuid",
  "cloudProviderName",
  "cloudProviderType",
  "enableEtcdEncryption",
  "minorUpgradeRoleVersion",
  "patchUpgradeRoleVersion",
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
  "etcdVersion",
];

const INTEGER_KEYS = [
  "numMasters",
  "numWorkers",
  "numMinWorkers",
  "numMaxWorkers",
  "allowWorkloadsOnMaster",
  "privileged",
  "appCatalogEnabled",
  "intervalInMins",
  "intervalInHours",
  "maxIntervalBackupCount",
  "maxTimestampBackupCount",
  "certExpiryHrs",
  "deployVendorOperator",
  "deployKubevirt",
  "etcdHeartbeatIntervalMs",
  "etcdElectionTimeoutMs",
  "isKubernetes",
  "keystoneEnabled",
  "authzEnabled",
  "isMesos",
  "isSwarm",
  "canMinorUpgrade",
  "canPatchUpgrade",
  "calicoIPv6PoolNatOutgoing",
];

const BOOLEAN_KEYS = [
  "enableCAS",
  "isPrivate",
  "internalElb",
  "enableMetallb",
  "dockerLiveRestoreEnabled",
  "isEtcdBackupEnabled",
  "useHostname",
  "enableProfileAgent",
  "enableCatapultMonitoring",
  "masterless",
  "canUpgrade",
  "debug",
  "ipv6",
  "felixIPv6Support",
];

const etcdBackupSchema = () =>
  Type.Object(
    {
      isEtcdBackupEnabled: I(),
      storageType: S(),
      storageProperties: Type.Object({ localPath: S() }, { additionalProperties: false }),
      intervalInMins: I(),
      intervalInHours: I(),
      dailyBackupTime: S(),
      maxIntervalBackupCount: I(),
      maxTimestampBackupCount: I(),
      taskStatus: Type.String({ description: "Whether the backup job was set up: success or error" }),
      taskErrorDetail: S(),
    },
    { additionalProperties: false },
  );

function schemaOf(key: string, version: ApiVersion): TSchema {
  if (STRING_KEYS.includes(key)) return S();
  if (INTEGER_KEYS.includes(key)) return I();
  if (BOOLEAN_KEYS.includes(key)) return B();
  switch (key) {
    case "calicoNatOutgoing":
      return version === "v4" ? B() : I();
    case "azs":
    case "subnets":
    case "privateSubnets":
      return Type.Array(S());
    case "tags":
    case "addonVersions":
      return Type.Record(Type.String(), Type.String());
    case "upgradingTo":
      return Type.Union([S(), Type.Null()]);
    case "etcdBackup":
      return etcdBackupSchema();
  }
  throw new Error(`read-schema: no type for ${key}`);
}

function readSchema(version: ApiVersion, keys: readonly string[]) {
  const properties: Record<string, TSchema> = {};
  for (const key of keys) properties[key] = schemaOf(key, version);
  return Type.Object(properties, { additionalProperties: false, description: `Cluster record (${version} read set)` });
}

export const clusterReadSchemaV4 = readSchema("v4", CLUSTER_READ_KEYS_V4);
export const clusterReadSchemaV3 = readSchema("v3", CLUSTER_READ_KEYS_V3);
