import type { clusters } from "@keelson/db";
import { Value } from "typebox/value";
import { describe, expect, it } from "vitest";
import { loadCatalogue } from "../src/domain/catalogue/catalogue.ts";
import {
  CLUSTER_READ_KEYS_V3,
  CLUSTER_READ_KEYS_V4,
  type ClusterView,
  presentClusterV3,
  presentClusterV4,
} from "../src/domain/clusters/present/presenters.ts";
import { clusterReadSchemaV3, clusterReadSchemaV4 } from "../src/domain/clusters/present/read-schema.ts";
import type { ApiVersion, ClusterSpec } from "../src/domain/clusters/spec/fields.ts";
import { parseClusterCreate } from "../src/domain/clusters/spec/spec.ts";

const catalogue = loadCatalogue();
const newest = catalogue.newest.roleVersion;

// ---------------------------------------------------------------------------------------------
// Read sets transcribed by hand from spec §2.1: every field of the main table (masterVipVrouterId
// included) except where a note restricts the version, plus the read-only tables. Notes:
// - enableCAS: "v3 read returns it; v4 read does not"; enableCatapultMonitoring: "Returned by
//   v3 read, not by v4 read".
// - numMinWorkers/numMaxWorkers and kubeRoleVersion say "v3 read returns it", which affirms v3
//   without excluding v4 (all fields are returned unless a note restricts): both reads.
// - v3-create-only fields: v3 read returns all of them except additionalAWSDiskSize.
// - enableEtcdEncryption: v4 read only. The second taskStatus lives in v4's nested etcdBackup
//   (issue 2, compatibility section).
// ---------------------------------------------------------------------------------------------
const TABLE_BOTH = [
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
];
const READ_ONLY_BOTH = [
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
];
const EXPECTED_V4 = [...TABLE_BOTH, ...READ_ONLY_BOTH, "enableEtcdEncryption", "etcdBackup"];
const EXPECTED_V3 = [
  ...TABLE_BOTH,
  "enableCAS",
  "enableCatapultMonitoring",
  "deployVendorOperator",
  "deployKubevirt",
  "etcdHeartbeatIntervalMs",
  "etcdElectionTimeoutMs",
  "masterless",
  ...READ_ONLY_BOTH,
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
];

/** Read types from §2.1 (the read direction where the two differ). */
type ReadType = "string" | "integer" | "boolean" | "string[]" | "map" | "string|null" | "etcdBackup";
const INTEGER = [
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
const BOOLEAN = [
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
function readTypeOf(key: string, version: ApiVersion): ReadType {
  if (key === "calicoNatOutgoing") return version === "v4" ? "boolean" : "integer";
  if (INTEGER.includes(key)) return "integer";
  if (BOOLEAN.includes(key)) return "boolean";
  if (["azs", "subnets", "privateSubnets"].includes(key)) return "string[]";
  if (["tags", "addonVersions"].includes(key)) return "map";
  if (key === "upgradingTo") return "string|null";
  if (key === "etcdBackup") return "etcdBackup";
  return "string";
}

function hasType(value: unknown, type: ReadType): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "integer":
      return Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "string[]":
      return Array.isArray(value) && value.every((v) => typeof v === "string");
    case "map":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "string|null":
      return value === null || typeof value === "string";
    case "etcdBackup":
      return typeof value === "object" && value !== null;
  }
}

type Row = typeof clusters.$inferSelect;

function viewOf(spec: ClusterSpec, overrides: Partial<Row> = {}, rest: Partial<ClusterView> = {}): ClusterView {
  const row: Row = {
    id: "11111111-2222-4333-8444-555555555555",
    projectId: "proj-1",
    name: spec.name,
    nodePoolId: "pool-1",
    cloudProviderId: "cp-1",
    kubeRoleVersion: spec.kubeRoleVersion,
    status: "pending",
    taskStatus: "success",
    taskError: "",
    lastOp: "create",
    lastOk: null,
    upgradingTo: null,
    masterVipVrouterId: spec.masterVipIpv4 ? "42" : "",
    backupTaskStatus: "success",
    backupTaskErrorDetail: "",
    spec,
    caCertPem: "PEM",
    caKeyEnc: "ENC",
    createdAt: "2025-01-01T00:00:00.000Z",
    updatedAt: "2025-01-01T00:00:00.000Z",
    ...overrides,
  };
  return {
    row,
    cloudProvider: { uuid: "cp-1", name: "local", type: "local" },
    nodePool: { uuid: "pool-1", name: "local-pool" },
    masterStatus: "healthy",
    workerStatus: "healthy",
    upgrade: { patch: null, minor: null },
    etcdVersion: "3.5.16",
    ...rest,
  };
}

const minimalSpec = (version: ApiVersion) =>
  parseClusterCreate(version, { name: "min" }, { catalogue, strict: false }).spec;

const FULL_V4_BODY = {
  name: "full",
  numMasters: 3,
  numWorkers: 4,
  enableCAS: true,
  numMinWorkers: 1,
  numMaxWorkers: 8,
  allowWorkloadsOnMaster: true,
  privileged: true,
  appCatalogEnabled: 0,
  ami: "ami-1",
  azs: ["a", "b"],
  region: "r1",
  masterFlavor: "m",
  workerFlavor: "w",
  sshKey: "ssh-ed25519 AAAA",
  domainId: "d",
  serviceFqdn: "svc.example.com",
  externalDnsName: "api.example.com",
  useVendorDomain: true,
  vpc: "vpc-1",
  subnets: ["s1"],
  privateSubnets: ["p1"],
  isPrivate: true,
  internalElb: true,
  httpProxy: "http://proxy:3128",
  containersCidr: "10.20.0.0/16",
  servicesCidr: "10.21.0.0/16",
  runtimeConfig: "api/all=true",
  k8sApiPort: 6443,
  masterVipIpv4: "10.0.0.10",
  masterVipIface: "eth0",
  enableMetallb: true,
  metallbCidr: "10.0.0.100-10.0.0.120",
  networkPlugin: "calico",
  calicoV4BlockSize: 26,
  calicoIpIpMode: "Always",
  calicoNatOutgoing: 1,
  calicoNodeCpuLimit: "2000m",
  calicoNodeMemoryLimit: "4Gi",
  calicoTyphaCpuLimit: "1",
  calicoTyphaMemoryLimit: "1Gi",
  calicoControllerCpuLimit: "200m",
  calicoControllerMemoryLimit: "512Mi",
  mtuSize: 1440,
  dockerLiveRestoreEnabled: true,
  etcdBackup: {
    isEtcdBackupEnabled: 1,
    storageType: "local",
    storageProperties: { localPath: "/backups" },
    intervalInHours: 6,
    maxIntervalBackupCount: 4,
    dailyBackupTime: "01:30",
    maxTimestampBackupCount: 9,
  },
  tags: { team: "infra" },
  kubeRoleVersion: catalogue.roles[0]?.roleVersion,
  cpuManagerPolicy: "static",
  topologyManagerPolicy: "restricted",
  reservedCPUs: "0-1",
  dockerPrivateRegistry: "r.example.com",
  quayPrivateRegistry: "q.example.com",
  gcrPrivateRegistry: "g.example.com",
  k8sPrivateRegistry: "k.example.com",
  useHostname: true,
  enableProfileAgent: true,
  enableCatapultMonitoring: false,
  dockerCentosPackageRepoUrl: "https://m.example.com/c",
  dockerUbuntuPackageRepoUrl: "https://m.example.com/u",
  containerRuntime: "containerd",
  certExpiryHrs: 72,
  addonOperatorImageTag: catalogue.file.addonOperatorTags[0],
  addonVersions: { coredns: "1.11.1" },
};
const fullSpec = parseClusterCreate("v4", FULL_V4_BODY, { catalogue, strict: true }).spec;
const fullV3Spec = parseClusterCreate(
  "v3",
  {
    ...Object.fromEntries(
      Object.entries(FULL_V4_BODY).filter(
        ([k]) =>
          ![
            "cpuManagerPolicy",
            "topologyManagerPolicy",
            "reservedCPUs",
            "dockerPrivateRegistry",
            "quayPrivateRegistry",
            "gcrPrivateRegistry",
            "k8sPrivateRegistry",
            "useHostname",
            "enableProfileAgent",
            "enableCatapultMonitoring",
            "dockerCentosPackageRepoUrl",
            "dockerUbuntuPackageRepoUrl",
          ].includes(k),
      ),
    ),
    deployVendorOperator: 1,
    deployKubevirt: true,
    etcdHeartbeatIntervalMs: 150,
    etcdElectionTimeoutMs: 1500,
    masterless: false,
    additionalAWSDiskSize: 20,
  },
  { catalogue, strict: true },
).spec;

const PRESENT = { v4: presentClusterV4, v3: presentClusterV3 } as const;
const EXPECTED = { v4: EXPECTED_V4, v3: EXPECTED_V3 } as const;
const VERSIONS: ApiVersion[] = ["v4", "v3"];

describe("read key sets (transcribed from the spec)", () => {
  it("the transcribed lists have no duplicates", () => {
    expect(new Set(EXPECTED_V4).size).toBe(EXPECTED_V4.length);
    expect(new Set(EXPECTED_V3).size).toBe(EXPECTED_V3.length);
  });

  it("CLUSTER_READ_KEYS_V4/V3 are exactly the spec's read sets", () => {
    expect([...CLUSTER_READ_KEYS_V4].sort()).toEqual([...EXPECTED_V4].sort());
    expect([...CLUSTER_READ_KEYS_V3].sort()).toEqual([...EXPECTED_V3].sort());
    expect(new Set(CLUSTER_READ_KEYS_V4).size).toBe(CLUSTER_READ_KEYS_V4.length);
    expect(new Set(CLUSTER_READ_KEYS_V3).size).toBe(CLUSTER_READ_KEYS_V3.length);
  });

  for (const version of VERSIONS) {
    it(`${version}: minimal and full clusters read exactly the ${version} set`, () => {
      for (const spec of [minimalSpec(version), fullSpec, fullV3Spec]) {
        const record = PRESENT[version](viewOf(spec));
        expect(Object.keys(record).sort()).toEqual([...EXPECTED[version]].sort());
      }
    });
  }

  it("v4 leaves out what the notes restrict to v3, and the reverse", () => {
    const v4 = presentClusterV4(viewOf(fullSpec));
    const v3 = presentClusterV3(viewOf(fullV3Spec));
    for (const key of ["enableCAS", "enableCatapultMonitoring", "masterless", "upgradingTo", "etcdVersion"]) {
      expect(key in v4).toBe(false);
    }
    for (const key of ["enableEtcdEncryption", "etcdBackup"]) expect(key in v3).toBe(false);
    // Accepted on create, never read; and the write-only node lists.
    for (const record of [v4, v3]) {
      for (const key of ["additionalAWSDiskSize", "masterNodes", "workerNodes", "caKeyEnc", "caCertPem", "spec"]) {
        expect(key in record).toBe(false);
      }
    }
  });
});

describe("read types", () => {
  for (const version of VERSIONS) {
    it(`${version}: every field has its read type, set or unset`, () => {
      for (const spec of [minimalSpec(version), fullSpec, fullV3Spec]) {
        for (const view of [viewOf(spec), viewOf(spec, { upgradingTo: newest, lastOk: "2025-01-02T00:00:00Z" })]) {
          const record = PRESENT[version](view);
          for (const key of EXPECTED[version]) {
            const type = readTypeOf(key, version);
            expect({ key, ok: hasType(record[key], type) }).toEqual({ key, ok: true });
          }
        }
      }
    });
  }

  it("the TypeBox read schemas list the same keys and accept what the presenters produce", () => {
    expect(Object.keys(clusterReadSchemaV4.properties).sort()).toEqual([...EXPECTED_V4].sort());
    expect(Object.keys(clusterReadSchemaV3.properties).sort()).toEqual([...EXPECTED_V3].sort());
    for (const spec of [minimalSpec("v4"), fullSpec, fullV3Spec]) {
      for (const view of [viewOf(spec), viewOf(spec, { upgradingTo: newest })]) {
        expect(Value.Check(clusterReadSchemaV4, presentClusterV4(view))).toBe(true);
        expect(Value.Check(clusterReadSchemaV3, presentClusterV3(view))).toBe(true);
      }
    }
    // And they would catch a retyped field.
    expect(Value.Check(clusterReadSchemaV4, { ...presentClusterV4(viewOf(fullSpec)), privileged: true })).toBe(false);
  });
});

describe("read values", () => {
  it.each(VERSIONS)("%s: an unset cluster reads the §8 defaults and the documented empty values", (version) => {
    const record = PRESENT[version](viewOf(minimalSpec(version)));
    expect(record).toMatchObject({
      k8sApiPort: "443",
      networkPlugin: "flannel",
      cpuManagerPolicy: "none",
      topologyManagerPolicy: "none",
      certExpiryHrs: 24,
      enableMetallb: false,
      kubeRoleVersion: newest,
      containerRuntime: "containerd",
      masterVipIpv4: "",
      masterVipVrouterId: "",
      privileged: 0,
      allowWorkloadsOnMaster: 0,
      useVendorDomain: "false",
      azs: [],
      tags: {},
      addonVersions: {},
      numWorkers: 0,
      intervalInMins: 0,
      storageType: "",
      localPath: "",
      mtuSize: "",
      lastOk: "",
      isKubernetes: 1,
      masterIp: "",
      keystoneEnabled: 1,
      authzEnabled: 1,
      flannelIfaceLabel: "",
      flannelPublicIfaceLabel: "",
      dockerRoot: "/var/lib/containerd",
      etcdDataDir: "/var/lib/etcd",
      canUpgrade: false,
    });
    expect(record.calicoNatOutgoing).toBe(version === "v4" ? false : 0);
  });

  it("v3: the v3-only read-only fields", () => {
    const record = presentClusterV3(viewOf(minimalSpec("v3")));
    expect(record).toMatchObject({
      enableCatapultMonitoring: true,
      monitoring: "true",
      enableCAS: false,
      isMesos: 0,
      isSwarm: 0,
      debug: false,
      ipv6: false,
      canMinorUpgrade: 0,
      minorUpgradeRoleVersion: "",
      canPatchUpgrade: 0,
      patchUpgradeRoleVersion: "",
      upgradingTo: null,
      kubeProxyMode: "iptables",
      apiserverStorageBackend: "etcd3",
      numSpotWorkers: "0",
      numMaxSpotWorkers: "0",
      spotWorkerFlavor: "",
      spotPrice: "",
      calicoIPv4: "",
      calicoIPv6PoolNatOutgoing: 0,
      felixIPv6Support: false,
      etcdVersion: "3.5.16",
      etcdHeartbeatIntervalMs: 0,
      deployKubevirt: 0,
    });
  });

  it("v4: a full cluster reads back what was written, in read types", () => {
    const record = presentClusterV4(viewOf(fullSpec));
    expect(record).toMatchObject({
      name: "full",
      nodePoolUuid: "pool-1",
      numMinWorkers: 1,
      numMaxWorkers: 8,
      allowWorkloadsOnMaster: 1,
      privileged: 1,
      appCatalogEnabled: 0,
      useVendorDomain: "true",
      azs: ["a", "b"],
      privateSubnets: ["p1"],
      k8sApiPort: "6443",
      masterVipVrouterId: "42",
      calicoV4BlockSize: "26",
      calicoNatOutgoing: true,
      mtuSize: "1440",
      isEtcdBackupEnabled: true,
      intervalInHours: 6,
      intervalInMins: 0,
      localPath: "/backups",
      cpuManagerPolicy: "static",
      topologyManagerPolicy: "restricted",
      certExpiryHrs: 72,
      // etcd always runs mutual TLS (the e2e kubectl test checks the started etcd).
      enableEtcdEncryption: "true",
      nodePoolName: "local-pool",
      cloudProviderUuid: "cp-1",
      cloudProviderName: "local",
      cloudProviderType: "local",
      uuid: "11111111-2222-4333-8444-555555555555",
      projectId: "proj-1",
    });
  });

  it("v3: calicoNatOutgoing and flags read as integers, enableCatapultMonitoring/monitoring follow the spec", () => {
    const record = presentClusterV3(viewOf({ ...fullV3Spec, enableCatapultMonitoring: false }));
    expect(record).toMatchObject({
      calicoNatOutgoing: 1,
      privileged: 1,
      deployVendorOperator: 1,
      deployKubevirt: 1,
      etcdHeartbeatIntervalMs: 150,
      etcdElectionTimeoutMs: 1500,
      masterless: false,
      enableCAS: true,
      enableCatapultMonitoring: false,
      monitoring: "false",
      calicoIPv4: "autodetect",
      calicoIPv4DetectionMethod: "first-found",
    });
  });

  it("v4 etcdBackup nests the settings with the backup job's status; top-level taskStatus is the cluster's", () => {
    const view = viewOf(fullSpec, {
      taskStatus: "updating",
      taskError: "",
      backupTaskStatus: "error",
      backupTaskErrorDetail: "disk full",
    });
    const record = presentClusterV4(view);
    expect(record.taskStatus).toBe("updating");
    expect(record.taskErrorDetail).toBe("disk full");
    expect(record.etcdBackup).toEqual({
      isEtcdBackupEnabled: 1,
      storageType: "local",
      storageProperties: { localPath: "/backups" },
      intervalInMins: 0,
      intervalInHours: 6,
      dailyBackupTime: "01:30",
      maxIntervalBackupCount: 4,
      maxTimestampBackupCount: 9,
      taskStatus: "error",
      taskErrorDetail: "disk full",
    });
    const off = presentClusterV4(viewOf(minimalSpec("v4"))).etcdBackup as Record<string, unknown>;
    expect(off).toMatchObject({ isEtcdBackupEnabled: 0, storageType: "", storageProperties: { localPath: "" } });
  });

  it("upgrade fields derive from the targets; upgradingTo from the row", () => {
    const spec = minimalSpec("v3");
    const both = viewOf(spec, { upgradingTo: "1.31.4-kls.1" }, { upgrade: { patch: "p-1", minor: "m-1" } });
    expect(presentClusterV3(both)).toMatchObject({
      canUpgrade: true,
      canPatchUpgrade: 1,
      patchUpgradeRoleVersion: "p-1",
      canMinorUpgrade: 1,
      minorUpgradeRoleVersion: "m-1",
      upgradingTo: "1.31.4-kls.1",
    });
    expect(presentClusterV4(viewOf(spec, {}, { upgrade: { patch: null, minor: "m-1" } })).canUpgrade).toBe(true);
    expect(presentClusterV4(viewOf(spec, {}, { upgrade: { patch: "p", minor: null } })).canUpgrade).toBe(true);
  });

  it("name, kubeRoleVersion and status come from the row; dockerRoot follows the runtime", () => {
    const spec = { ...minimalSpec("v4"), containerRuntime: "docker" as const };
    const record = presentClusterV4(
      viewOf(spec, { name: "renamed", kubeRoleVersion: "1.31.2-kls.1", status: "ok", lastOk: "2025-02-02" }),
    );
    expect(record).toMatchObject({
      name: "renamed",
      kubeRoleVersion: "1.31.2-kls.1",
      status: "ok",
      lastOk: "2025-02-02",
      dockerRoot: "/var/lib/docker",
      containerRuntime: "docker",
    });
  });

  it("a spec stored with the other type of a flag (older writer) still reads right", () => {
    const legacy = { name: "old", kubeRoleVersion: newest, privileged: 1, allowWorkloadsOnMaster: true, isPrivate: 1 };
    const record = presentClusterV4(viewOf(legacy as unknown as ClusterSpec));
    expect(record).toMatchObject({ privileged: 1, allowWorkloadsOnMaster: 1, isPrivate: true, certExpiryHrs: 24 });
  });
});

describe("read, write back, read: a fixed point", () => {
  // What a client read it can send back as a create body: read-only fields are ignored, the
  // read's empty values mean "not set", and the result reads the same.
  it.each([
    ["v4", fullSpec],
    ["v4", minimalSpec("v4")],
    ["v3", fullV3Spec],
    ["v3", minimalSpec("v3")],
  ] as const)("%s", (version, spec) => {
    const first = PRESENT[version](viewOf(spec));
    const parsed = parseClusterCreate(version, first, { catalogue, strict: false });
    const second = PRESENT[version](viewOf(parsed.spec, { masterVipVrouterId: first.masterVipVrouterId as string }));
    expect(second).toEqual(first);
  });
});
