import { describe, expect, it } from "vitest";
import { loadCatalogue } from "../src/domain/catalogue/catalogue.ts";
import type { ApiVersion, ClusterSpec } from "../src/domain/clusters/spec/fields.ts";
import { parseClusterCreate, parseClusterUpdate } from "../src/domain/clusters/spec/spec.ts";
import { ApiError } from "../src/http/errors.ts";

const catalogue = loadCatalogue();
const newest = catalogue.newest.roleVersion;
const oldest = catalogue.roles[0]?.roleVersion as string;
const operatorTag = catalogue.file.addonOperatorTags[0] as string;

const create = (version: ApiVersion, body: unknown, strict = false) =>
  parseClusterCreate(version, body, { catalogue, strict });
const update = (version: ApiVersion, current: ClusterSpec, body: unknown, strict = false) =>
  parseClusterUpdate(version, body, current, { catalogue, strict });

function rejection(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error("expected a 400, the body was accepted");
}

/** Asserts a 400 that names `field` (and matches `message` when given). */
function expect400(fn: () => unknown, field: string, message?: RegExp): ApiError {
  const error = rejection(fn);
  expect(error.statusCode).toBe(400);
  expect(error.field).toBe(field);
  expect(error.message).toContain(field.replace(/\[\d+\]$/, ""));
  if (message) expect(error.message).toMatch(message);
  return error;
}

const VERSIONS: ApiVersion[] = ["v4", "v3"];

// ---------------------------------------------------------------------------------------------
// Field sets transcribed by hand from spec §2.1 (C and U columns and their notes, and the
// paragraph "Fields accepted by v3 create only"). Not imported from the source on purpose.
// ---------------------------------------------------------------------------------------------
const CREATE_BOTH = [
  "name",
  "nodePoolUuid",
  "numMasters",
  "numWorkers",
  "enableCAS",
  "numMinWorkers",
  "numMaxWorkers",
  "allowWorkloadsOnMaster",
  "privileged",
  "appCatalogEnabled",
  "ami",
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
  "containerRuntime",
  "certExpiryHrs",
  "addonOperatorImageTag",
  "addonVersions",
];
const CREATE_V4_ONLY = [
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
];
const CREATE_V3_ONLY = [
  "deployVendorOperator",
  "deployKubevirt",
  "etcdHeartbeatIntervalMs",
  "etcdElectionTimeoutMs",
  "masterless",
  "additionalAWSDiskSize",
];
/** In the table with an empty C column. */
const UPDATE_ONLY = ["customAmi"];
const UPDATE_BOTH = [
  "numWorkers",
  "numMinWorkers",
  "numMaxWorkers",
  "customAmi",
  "isEtcdBackupEnabled",
  "intervalInMins",
  "intervalInHours",
  "dailyBackupTime",
  "maxIntervalBackupCount",
  "maxTimestampBackupCount",
  "storageType",
  "localPath",
  "tags",
  // Its C column says v4 only; its U column carries no version note.
  "enableProfileAgent",
  "certExpiryHrs",
];
const UPDATE_V4_ONLY = ["dockerCentosPackageRepoUrl", "dockerUbuntuPackageRepoUrl", "addonOperatorImageTag"];

const ALL_FIELDS = [...CREATE_BOTH, ...CREATE_V4_ONLY, ...CREATE_V3_ONLY, ...UPDATE_ONLY];

/** A valid value of each field (different from its default), with the fields a rule needs beside it. */
const SAMPLES: Record<string, { value: unknown; with?: Record<string, unknown> }> = {
  nodePoolUuid: { value: "pool-1" },
  numMasters: { value: 3 },
  numWorkers: { value: 4 },
  enableCAS: { value: true, with: { numMinWorkers: 1, numMaxWorkers: 5 } },
  numMinWorkers: { value: 1 },
  numMaxWorkers: { value: 5 },
  allowWorkloadsOnMaster: { value: 1 },
  privileged: { value: true },
  appCatalogEnabled: { value: 1 },
  ami: { value: "ami-123" },
  customAmi: { value: "my-image" },
  azs: { value: ["us-east-1a"] },
  region: { value: "us-east-1" },
  masterFlavor: { value: "m5.large" },
  workerFlavor: { value: "m5.xlarge" },
  sshKey: { value: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE user@host" },
  domainId: { value: "Z123" },
  serviceFqdn: { value: "svc.example.com" },
  externalDnsName: { value: "api.example.com" },
  useVendorDomain: { value: true },
  vpc: { value: "vpc-1" },
  subnets: { value: ["subnet-1"] },
  privateSubnets: { value: ["subnet-2"], with: { vpc: "vpc-1" } },
  isPrivate: { value: true },
  internalElb: {
    value: true,
    with: { isPrivate: true, vpc: "vpc-1", httpProxy: "http://proxy:3128", privateSubnets: ["s"] },
  },
  httpProxy: { value: "http://proxy.example.com:3128" },
  containersCidr: { value: "10.20.0.0/16" },
  servicesCidr: { value: "10.21.0.0/16" },
  runtimeConfig: { value: "api/all=true" },
  k8sApiPort: { value: "6443" },
  masterVipIpv4: { value: "10.0.0.10", with: { masterVipIface: "eth0" } },
  masterVipIface: { value: "eth0" },
  enableMetallb: { value: true, with: { metallbCidr: "10.0.0.100-10.0.0.150" } },
  metallbCidr: { value: "10.0.0.100-10.0.0.150" },
  networkPlugin: { value: "calico" },
  calicoV4BlockSize: { value: "26" },
  calicoIpIpMode: { value: "CrossSubnet" },
  calicoNatOutgoing: { value: true },
  calicoNodeCpuLimit: { value: "2000m" },
  calicoNodeMemoryLimit: { value: "4Gi" },
  calicoTyphaCpuLimit: { value: "500m" },
  calicoTyphaMemoryLimit: { value: "1Gi" },
  calicoControllerCpuLimit: { value: "200m" },
  calicoControllerMemoryLimit: { value: "512Mi" },
  mtuSize: { value: "1440" },
  dockerLiveRestoreEnabled: { value: true },
  isEtcdBackupEnabled: { value: true },
  intervalInMins: { value: 30, with: { maxIntervalBackupCount: 3 } },
  intervalInHours: { value: 2, with: { maxIntervalBackupCount: 3 } },
  dailyBackupTime: { value: "02:30", with: { maxTimestampBackupCount: 3 } },
  maxIntervalBackupCount: { value: 7 },
  maxTimestampBackupCount: { value: 7 },
  storageType: { value: "local" },
  localPath: { value: "/var/backups/etcd", with: { storageType: "local" } },
  tags: { value: { team: "infra" } },
  kubeRoleVersion: { value: oldest },
  cpuManagerPolicy: { value: "static" },
  topologyManagerPolicy: { value: "best-effort" },
  reservedCPUs: { value: "0-1" },
  dockerPrivateRegistry: { value: "registry.example.com:5000" },
  quayPrivateRegistry: { value: "quay.example.com" },
  gcrPrivateRegistry: { value: "gcr.example.com" },
  k8sPrivateRegistry: { value: "k8s.example.com" },
  useHostname: { value: true },
  enableProfileAgent: { value: true },
  enableCatapultMonitoring: { value: false },
  dockerCentosPackageRepoUrl: { value: "https://mirror.example.com/centos" },
  dockerUbuntuPackageRepoUrl: { value: "https://mirror.example.com/ubuntu" },
  containerRuntime: { value: "docker" },
  certExpiryHrs: { value: 48 },
  addonOperatorImageTag: { value: operatorTag },
  addonVersions: { value: { coredns: "1.11.1" } },
  deployVendorOperator: { value: 1 },
  deployKubevirt: { value: 1 },
  etcdHeartbeatIntervalMs: { value: 150 },
  etcdElectionTimeoutMs: { value: 1500 },
  masterless: { value: true },
  additionalAWSDiskSize: { value: 50 },
};

const DEFAULTS = {
  k8sApiPort: "443",
  networkPlugin: "flannel",
  cpuManagerPolicy: "none",
  topologyManagerPolicy: "none",
  enableCatapultMonitoring: true,
  certExpiryHrs: 24,
  enableMetallb: false,
};

describe("cluster create: defaults and name", () => {
  it.each(VERSIONS)("%s: a body with only a name gets the §8 defaults, the newest role and its runtime", (version) => {
    const { spec, ignored, masterNodes, workerNodes } = create(version, { name: "c1" });
    expect(spec).toEqual({
      name: "c1",
      kubeRoleVersion: newest,
      containerRuntime: catalogue.newest.containerRuntime,
      ...DEFAULTS,
    });
    expect(ignored).toEqual([]);
    expect(masterNodes).toEqual([]);
    expect(workerNodes).toEqual([]);
  });

  it.each([
    ["missing", {}],
    ["empty", { name: "" }],
    ["null", { name: null }],
    ["blank", { name: "   " }],
    ["not a string", { name: 7 }],
    ["too long", { name: "x".repeat(256) }],
    ["a control character", { name: "a\nb" }],
  ])("a name that is %s is a 400 naming name", (_, body) => {
    for (const version of VERSIONS) expect400(() => create(version, body), "name");
  });

  it("accepts a 255-character name and keeps it as given", () => {
    expect(create("v4", { name: "é".repeat(255) }).spec.name).toBe("é".repeat(255));
  });

  it.each([null, [], "x", 3])("a body that is not an object (%j) is a 400 naming body", (body) => {
    expect400(() => create("v4", body), "body");
  });
});

describe("cluster create: field sets per version (§2.1)", () => {
  const fields = ALL_FIELDS.filter((f) => f !== "name");
  const acceptedBy = (version: ApiVersion, field: string) =>
    CREATE_BOTH.includes(field) || (version === "v4" ? CREATE_V4_ONLY : CREATE_V3_ONLY).includes(field);

  for (const version of VERSIONS) {
    it.each(fields)(`${version} create: %s`, (field) => {
      const sample = SAMPLES[field];
      if (!sample) throw new Error(`no sample for ${field}`);
      const { spec, ignored } = create(version, { name: "c", ...sample.with, [field]: sample.value });
      const stored = (spec as unknown as Record<string, unknown>)[field];
      if (acceptedBy(version, field)) {
        expect(ignored).not.toContain(field);
        expect(stored).toEqual(sample.value);
      } else {
        expect(ignored).toContain(field);
        expect(stored).toEqual((DEFAULTS as Record<string, unknown>)[field]);
      }
    });
  }

  it("the hand-made lists cover every sample", () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(fields.sort());
  });
});

describe("cluster update: field sets per version (§2.1)", () => {
  const base = create("v4", { name: "c" }).spec;
  // numMin/MaxWorkers apply on update only while autoscaling is on.
  const withCas = create("v4", { name: "c", enableCAS: true, numMinWorkers: 0, numMaxWorkers: 9 }).spec;
  const acceptedBy = (version: ApiVersion, field: string) =>
    UPDATE_BOTH.includes(field) || (version === "v4" && UPDATE_V4_ONLY.includes(field));

  for (const version of VERSIONS) {
    it.each(ALL_FIELDS)(`${version} update: %s`, (field) => {
      const sample = SAMPLES[field] ?? { value: "renamed" };
      const current = field === "numMinWorkers" || field === "numMaxWorkers" ? withCas : base;
      const companions = Object.fromEntries(
        Object.entries(sample.with ?? {}).filter(([key]) => acceptedBy(version, key)),
      );
      if (!acceptedBy(version, field)) {
        const { spec, ignored, changed } = update(version, current, { ...companions, [field]: sample.value });
        expect(ignored).toContain(field);
        expect(changed).not.toContain(field);
        expect((spec as unknown as Record<string, unknown>)[field]).toEqual(
          (current as unknown as Record<string, unknown>)[field],
        );
        return;
      }
      const { spec, ignored, changed } = update(version, current, { ...companions, [field]: sample.value });
      expect(ignored).not.toContain(field);
      expect(changed).toContain(field);
      expect((spec as unknown as Record<string, unknown>)[field]).toEqual(sample.value);
    });
  }
});

describe("coercions of client habits", () => {
  it.each([
    ["allowWorkloadsOnMaster", true, 1],
    ["allowWorkloadsOnMaster", false, 0],
    ["allowWorkloadsOnMaster", 1, 1],
    ["allowWorkloadsOnMaster", 0, 0],
    ["appCatalogEnabled", true, 1],
    ["privileged", 1, true],
    ["privileged", 0, false],
    ["privileged", true, true],
    ["isPrivate", 1, true],
    ["calicoNatOutgoing", 1, true],
    ["calicoNatOutgoing", 0, false],
    ["useVendorDomain", 1, true],
    ["useVendorDomain", "true", true],
    ["useVendorDomain", "false", false],
    ["dockerLiveRestoreEnabled", 0, false],
    ["mtuSize", 1440, "1440"],
    ["mtuSize", "1440", "1440"],
    ["mtuSize", "01440", "1440"],
    ["k8sApiPort", 6443, "6443"],
    ["k8sApiPort", "6443", "6443"],
    ["calicoV4BlockSize", 26, "26"],
    ["tags", { a: "b", "pf9-system:monitoring": "true" }, { a: "b", "pf9-system:monitoring": "true" }],
    ["azs", ["a", "b"], ["a", "b"]],
    ["addonVersions", { coredns: "1.11.1" }, { coredns: "1.11.1" }],
  ])("%s: %j is stored as %j", (field, input, stored) => {
    for (const version of VERSIONS) {
      const { spec } = create(version, { name: "c", [field]: input });
      expect((spec as unknown as Record<string, unknown>)[field]).toEqual(stored);
    }
  });

  it.each([
    ["deployKubevirt", true, 1],
    ["deployVendorOperator", false, 0],
    ["masterless", 1, true],
  ])("v3 %s: %j is stored as %j", (field, input, stored) => {
    expect((create("v3", { name: "c", [field]: input }).spec as unknown as Record<string, unknown>)[field]).toEqual(
      stored,
    );
  });

  it.each([
    ["useHostname", 1, true],
    ["enableProfileAgent", 0, false],
    ["enableCatapultMonitoring", 0, false],
  ])("v4 %s: %j is stored as %j", (field, input, stored) => {
    expect((create("v4", { name: "c", [field]: input }).spec as unknown as Record<string, unknown>)[field]).toEqual(
      stored,
    );
  });

  it.each([
    ["numWorkers", "3", "numWorkers", /must be an integer \(got string\)/],
    ["numWorkers", 1.5, "numWorkers", /integer/],
    ["numWorkers", true, "numWorkers", /integer/],
    ["numMasters", -1, "numMasters", /at least 0/],
    ["allowWorkloadsOnMaster", 2, "allowWorkloadsOnMaster", /1 or 0/],
    ["allowWorkloadsOnMaster", "true", "allowWorkloadsOnMaster", /1 or 0/],
    ["privileged", "yes", "privileged", /boolean/],
    ["privileged", 2, "privileged", /boolean/],
    ["isPrivate", "true", "isPrivate", /boolean/],
    ["useVendorDomain", "yes", "useVendorDomain", /boolean/],
    ["mtuSize", 1440.5, "mtuSize", /whole number/],
    ["mtuSize", "15a0", "mtuSize", /whole number or a string of digits/],
    ["mtuSize", true, "mtuSize", /whole number/],
    ["k8sApiPort", "-1", "k8sApiPort", /digits/],
    ["azs", "us-east-1a", "azs", /array of strings \(got string\)/],
    ["azs", [1], "azs[0]", /non-empty string/],
    ["subnets", ["ok", ""], "subnets[1]", /non-empty string/],
    ["tags", ["a"], "tags", /object of string values \(got array\)/],
    ["tags", { a: 1 }, "tags.a", /must be a string \(got number\)/],
    ["addonVersions", "x", "addonVersions", /object/],
    ["sshKey", 5, "sshKey", /must be a string \(got number\)/],
    ["region", { a: 1 }, "region", /string/],
    ["certExpiryHrs", "24", "certExpiryHrs", /integer/],
  ])("%s = %j is a 400 naming %s and the expected type", (field, value, named, message) => {
    for (const version of VERSIONS) expect400(() => create(version, { name: "c", [field]: value }), named, message);
  });

  it.each([
    ["masterVipIpv4", ""],
    ["masterVipIface", ""],
    ["metallbCidr", ""],
    ["mtuSize", ""],
    ["calicoV4BlockSize", ""],
    ["containersCidr", ""],
    ["dailyBackupTime", ""],
    ["storageType", ""],
    ["localPath", ""],
    ["intervalInMins", 0],
    ["intervalInHours", 0],
    ["maxIntervalBackupCount", 0],
    ["maxTimestampBackupCount", 0],
    ["azs", []],
    ["privateSubnets", []],
    ["tags", {}],
    ["region", null],
    ["numWorkers", null],
  ])("%s = %j (what a read shows when unset) leaves the field unset", (field, value) => {
    const { spec, ignored } = create("v4", { name: "c", [field]: value });
    expect(field in spec).toBe(false);
    expect(ignored).toEqual([]);
  });

  it.each([
    ["k8sApiPort", "", "443"],
    ["networkPlugin", "", "flannel"],
    ["cpuManagerPolicy", "", "none"],
    ["topologyManagerPolicy", null, "none"],
    ["certExpiryHrs", null, 24],
    ["kubeRoleVersion", "", newest],
  ])("%s = %j gets the default", (field, value, expected) => {
    expect((create("v4", { name: "c", [field]: value }).spec as unknown as Record<string, unknown>)[field]).toEqual(
      expected,
    );
  });

  it("0 stays a value for counts where 0 means something", () => {
    const { spec } = create("v4", { name: "c", numMasters: 0, numWorkers: 0, numMinWorkers: 0, numMaxWorkers: 0 });
    expect(spec).toMatchObject({ numMasters: 0, numWorkers: 0, numMinWorkers: 0, numMaxWorkers: 0 });
  });
});

/** [field, valid values, invalid values, fields a rule needs beside it, version]. */
type LimitCase = [string, unknown[], unknown[], Record<string, unknown>?, ApiVersion?];

const LIMITS: LimitCase[] = [
  ["networkPlugin", ["flannel", "calico", "noop", "weave"], ["cilium", "Flannel", 1]],
  ["calicoIpIpMode", ["Always", "Never", "CrossSubnet"], ["always", "Sometimes"]],
  ["cpuManagerPolicy", ["none", "static"], ["dynamic", "None"], {}, "v4"],
  [
    "topologyManagerPolicy",
    ["none", "best-effort", "restricted", "single-numa-node"],
    ["strict", "best_effort"],
    {},
    "v4",
  ],
  ["containerRuntime", ["docker", "containerd"], ["cri-o", "Docker"]],
  ["storageType", ["local"], ["s3", "Local"]],
  [
    "dailyBackupTime",
    ["00:00", "23:59", "07:30"],
    ["24:00", "7:30", "12:60", "12-30", "12:30:00"],
    { maxTimestampBackupCount: 2 },
  ],
  ["reservedCPUs", ["0", "0-3", "0-3,8,10-11", "2,1"], ["3-0", "0-3,", "a", "0,,1", " 0", "0-3,9-8"], {}, "v4"],
  [
    "metallbCidr",
    ["10.0.0.1-10.0.0.10", "10.0.0.1-10.0.0.1", "10.0.0.1-10.0.0.5,10.0.1.1-10.0.1.5", "10.0.0.1 - 10.0.0.9"],
    [
      "10.0.0.10-10.0.0.1",
      "10.0.0.0/24",
      "10.0.0.1",
      "10.0.0.1-10.0.0.300",
      "10.0.0.1-10.0.0.10,",
      "10.0.0.1-10.0.0.10,10.0.0.5-10.0.0.20",
    ],
    { enableMetallb: true },
  ],
  [
    "containersCidr",
    ["10.20.0.0/16", "0.0.0.0/0", "10.0.0.1/32", "192.168.0.0/24"],
    ["10.20.1.0/16", "10.20.0.0/33", "10.20.0.0", "300.0.0.0/8", "10.20.0.0/16/1", "10.20.0.0/016"],
  ],
  ["servicesCidr", ["10.21.0.0/16", "172.16.0.0/12"], ["10.21.0.1/16", "10.21.0.0/-1", "ten/8"]],
  [
    "masterVipIpv4",
    ["10.0.0.10", "192.168.1.254"],
    ["10.0.0.256", "10.0.0", "fe80::1", "010.0.0.1"],
    { masterVipIface: "eth0" },
  ],
  ["masterVipIface", ["eth0", "bond0.100", "ens3"], ["a/b", "averyveryverylongname", "eth 0", "eth0:1"]],
  ["certExpiryHrs", [1, 24, 876_000], [0, -1, 876_001, 1.5]],
  ["k8sApiPort", [1, "443", 65_535, "6443"], [0, 65_536, "abc", "70000"]],
  ["mtuSize", [576, 9000, "1500"], [575, 9001, "100"]],
  ["calicoV4BlockSize", [20, 32, "26"], [19, 33, "0"]],
  ["numMasters", [0, 3, 5], [-1, 2.5]],
  ["numWorkers", [0, 100], [-3]],
  ["intervalInMins", [1, 60, 1440], [-5, 1.5], { maxIntervalBackupCount: 2 }],
  ["intervalInHours", [1, 24], [-1], { maxIntervalBackupCount: 2 }],
  ["maxIntervalBackupCount", [1, 30], [-1, 0.5], { intervalInHours: 1 }],
  ["maxTimestampBackupCount", [1, 30], [-2], { dailyBackupTime: "01:00" }],
  ["localPath", ["/var/backups", "/etcd-backup"], ["relative/path", "/var/../etc", "/a\nb"], { storageType: "local" }],
  ["etcdHeartbeatIntervalMs", [100, 200], [-1, 201, 1.5], {}, "v3"],
  ["etcdElectionTimeoutMs", [500, 1000, 50_000], [50_001, 499, -1], {}, "v3"],
  ["additionalAWSDiskSize", [0, 100], [-1], {}, "v3"],
  ["calicoNodeCpuLimit", ["2000m", "1", "0.5", "2"], ["2 cores", "-1", "m"]],
  ["calicoNodeMemoryLimit", ["512Mi", "1G", "4Gi"], ["512MB", "lots"]],
  ["calicoControllerMemoryLimit", ["256Mi"], ["256 Mi"]],
  [
    "externalDnsName",
    ["api.example.com", "10.0.0.5", "k8s"],
    ["bad_name.example.com", "-x.com", "a..b", "x".repeat(64)],
  ],
  ["serviceFqdn", ["svc.example.com"], ["svc example.com"]],
  [
    "dockerCentosPackageRepoUrl",
    ["https://mirror.example.com/centos", "http://10.0.0.1/repo"],
    ["ftp://x.example.com", "not a url"],
    {},
    "v4",
  ],
  [
    "httpProxy",
    ["http://proxy:3128", "https://user:secret@proxy.example.com:3128/", "proxy.example.com:3128"],
    ["http://proxy :3128", "ftp://proxy:21", "http://proxy:3128/path", "http://pro\txy:3128", "proxy:3128?x=1"],
  ],
  ["addonOperatorImageTag", catalogue.file.addonOperatorTags, ["9.9.9"]],
  ["kubeRoleVersion", catalogue.roles.map((r) => r.roleVersion), ["1.0.0-kls.1", "1.31.4", "latest"]],
];

describe("§8 limits and enums, both ways", () => {
  for (const [field, valid, invalid, companions = {}, onlyVersion] of LIMITS) {
    const versions = onlyVersion ? [onlyVersion] : VERSIONS;
    for (const version of versions) {
      it(`${version} ${field} accepts ${valid.map((v) => JSON.stringify(v)).join(" ")}`, () => {
        for (const value of valid) {
          const { spec, ignored } = create(version, { name: "c", ...companions, [field]: value });
          expect(ignored).toEqual([]);
          const stored = (spec as unknown as Record<string, unknown>)[field];
          expect(stored === value || stored === String(value)).toBe(true);
        }
      });
      it(`${version} ${field} refuses ${invalid.map((v) => JSON.stringify(v)).join(" ")}`, () => {
        for (const value of invalid)
          expect400(() => create(version, { name: "c", ...companions, [field]: value }), field);
      });
    }
  }

  it("an unknown kubeRoleVersion names it and lists valid ones", () => {
    const error = expect400(() => create("v4", { name: "c", kubeRoleVersion: "1.0.0-kls.1" }), "kubeRoleVersion");
    expect(error.message).toContain("1.0.0-kls.1");
    expect(error.message).toContain(newest);
  });

  it("CIDR with host bits set suggests the network address", () => {
    expect400(() => create("v4", { name: "c", containersCidr: "10.20.1.0/16" }), "containersCidr", /10\.20\.0\.0\/16/);
  });

  it("containerRuntime defaults to the runtime of the chosen role version", () => {
    const { spec } = create("v4", { name: "c", kubeRoleVersion: oldest });
    expect(spec.containerRuntime).toBe(catalogue.find(oldest)?.containerRuntime);
  });
});

/** [description, version, body, expected: a field named by the 400, or "ok"]. */
type RuleCase = [string, ApiVersion, Record<string, unknown>, string];
const ELB = { internalElb: true, isPrivate: true, vpc: "vpc-1", httpProxy: "http://p:3128", privateSubnets: ["s-1"] };

const RULES: RuleCase[] = [
  ["1: enableCAS without numMinWorkers", "v4", { enableCAS: true, numMaxWorkers: 5 }, "numMinWorkers"],
  ["1: enableCAS without numMaxWorkers", "v3", { enableCAS: 1, numMinWorkers: 1 }, "numMaxWorkers"],
  ["1: enableCAS with both", "v4", { enableCAS: true, numMinWorkers: 1, numMaxWorkers: 5 }, "ok"],
  ["1: min above max", "v4", { enableCAS: true, numMinWorkers: 6, numMaxWorkers: 5 }, "numMinWorkers"],
  ["1: min equal to max", "v3", { enableCAS: true, numMinWorkers: 5, numMaxWorkers: 5 }, "ok"],
  ["1: enableCAS false needs neither", "v4", { enableCAS: false }, "ok"],
  ["2: internalElb with everything", "v4", ELB, "ok"],
  ["2: internalElb with isPrivate false", "v4", { ...ELB, isPrivate: false }, "isPrivate"],
  ["2: internalElb without isPrivate", "v3", { ...ELB, isPrivate: undefined }, "isPrivate"],
  ["2: internalElb without vpc", "v4", { ...ELB, vpc: undefined }, "vpc"],
  ["2: internalElb without httpProxy", "v3", { ...ELB, httpProxy: "" }, "httpProxy"],
  ["2: internalElb false needs nothing", "v4", { internalElb: false }, "ok"],
  ["3: vpc and isPrivate without privateSubnets", "v4", { vpc: "vpc-1", isPrivate: true }, "privateSubnets"],
  ["3: vpc and isPrivate with privateSubnets", "v3", { vpc: "vpc-1", isPrivate: true, privateSubnets: ["s"] }, "ok"],
  ["3: vpc, not private, no privateSubnets", "v4", { vpc: "vpc-1", isPrivate: false }, "ok"],
  ["3: privateSubnets without vpc (ignored)", "v4", { isPrivate: true, privateSubnets: ["s"] }, "ok"],
  ["4: masterVipIpv4 without masterVipIface", "v4", { masterVipIpv4: "10.0.0.10" }, "masterVipIface"],
  ["4: masterVipIpv4 with masterVipIface", "v3", { masterVipIpv4: "10.0.0.10", masterVipIface: "eth0" }, "ok"],
  ["4: masterVipIface alone", "v4", { masterVipIface: "eth0" }, "ok"],
  [
    "5: minutes and hours together",
    "v4",
    { intervalInMins: 30, intervalInHours: 1, maxIntervalBackupCount: 3 },
    "intervalInHours",
  ],
  ["5: minutes without maxIntervalBackupCount", "v4", { intervalInMins: 30 }, "maxIntervalBackupCount"],
  ["5: hours without maxIntervalBackupCount", "v3", { intervalInHours: 3 }, "maxIntervalBackupCount"],
  ["5: daily without maxTimestampBackupCount", "v4", { dailyBackupTime: "01:00" }, "maxTimestampBackupCount"],
  [
    "5: interval and daily with both counts",
    "v4",
    { intervalInHours: 3, maxIntervalBackupCount: 2, dailyBackupTime: "01:00", maxTimestampBackupCount: 7 },
    "ok",
  ],
  ["5: counts alone", "v3", { maxIntervalBackupCount: 2, maxTimestampBackupCount: 2 }, "ok"],
  ["6: certExpiryHrs 0", "v4", { certExpiryHrs: 0 }, "certExpiryHrs"],
  ["6: certExpiryHrs negative", "v3", { certExpiryHrs: -24 }, "certExpiryHrs"],
  ["6: certExpiryHrs 1", "v3", { certExpiryHrs: 1 }, "ok"],
  ["metallb on without a pool", "v4", { enableMetallb: true }, "metallbCidr"],
  ["metallb on with a pool", "v3", { enableMetallb: 1, metallbCidr: "10.1.0.1-10.1.0.9" }, "ok"],
  ["metallb off with a pool", "v4", { enableMetallb: false, metallbCidr: "10.1.0.1-10.1.0.9" }, "ok"],
  ["CIDRs overlapping", "v4", { containersCidr: "10.0.0.0/8", servicesCidr: "10.96.0.0/12" }, "servicesCidr"],
  ["CIDRs equal", "v3", { containersCidr: "10.20.0.0/16", servicesCidr: "10.20.0.0/16" }, "servicesCidr"],
  ["CIDRs adjacent", "v4", { containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" }, "ok"],
  ["localPath without storageType", "v4", { localPath: "/backups" }, "localPath"],
  ["localPath with backups on (storageType defaults)", "v4", { isEtcdBackupEnabled: true, localPath: "/b" }, "ok"],
  ["etcd election 5x heartbeat", "v3", { etcdHeartbeatIntervalMs: 200, etcdElectionTimeoutMs: 1000 }, "ok"],
  [
    "etcd election under 5x heartbeat",
    "v3",
    { etcdHeartbeatIntervalMs: 200, etcdElectionTimeoutMs: 999 },
    "etcdElectionTimeoutMs",
  ],
  [
    "etcd heartbeat too slow for the default election",
    "v3",
    { etcdHeartbeatIntervalMs: 250 },
    "etcdHeartbeatIntervalMs",
  ],
];

describe("§4.8 rules and the other cross-field rules, both ways", () => {
  it.each(RULES)("%s (%s)", (_, version, body, expected) => {
    const run = () => create(version, { name: "c", ...body });
    if (expected === "ok") expect(() => run()).not.toThrow();
    else expect400(run, expected);
  });

  it("rule 3: privateSubnets without vpc is dropped and reported, never an error even when strict", () => {
    for (const strict of [false, true]) {
      const { spec, ignored } = create("v4", { name: "c", isPrivate: true, privateSubnets: ["s"] }, strict);
      expect(spec.privateSubnets).toBeUndefined();
      expect(ignored).toEqual(["privateSubnets"]);
    }
  });

  it("rule 2: httpProxy is required with internalElb (no VPN escape: the API cannot tell)", () => {
    expect400(() => create("v4", { name: "c", ...ELB, httpProxy: undefined }), "httpProxy", /internalElb/);
  });

  it("messages name the rule", () => {
    expect400(() => create("v4", { name: "c", enableCAS: true }), "numMinWorkers", /enableCAS.*4\.8\.1/);
    expect400(() => create("v4", { name: "c", masterVipIpv4: "10.0.0.1" }), "masterVipIface", /4\.8\.4/);
    expect400(() => create("v4", { name: "c", dailyBackupTime: "01:00" }), "maxTimestampBackupCount", /4\.8\.5/);
  });

  it("enabling backups defaults storageType to local", () => {
    expect(create("v4", { name: "c", isEtcdBackupEnabled: true }).spec.storageType).toBe("local");
    expect(create("v4", { name: "c", isEtcdBackupEnabled: false }).spec.storageType).toBeUndefined();
  });
});

describe("nested etcdBackup", () => {
  const flat = {
    isEtcdBackupEnabled: true,
    storageType: "local",
    localPath: "/var/lib/etcd-backup",
    intervalInMins: 60,
    maxIntervalBackupCount: 5,
    dailyBackupTime: "03:15",
    maxTimestampBackupCount: 7,
  };
  const nested = {
    etcdBackup: {
      isEtcdBackupEnabled: 1,
      storageType: "local",
      storageProperties: { localPath: "/var/lib/etcd-backup" },
      intervalInMins: 60,
      maxIntervalBackupCount: 5,
      dailyBackupTime: "03:15",
      maxTimestampBackupCount: 7,
    },
  };

  it.each(VERSIONS)("%s: the nested object is equivalent to the flat fields", (version) => {
    const a = create(version, { name: "c", ...flat });
    const b = create(version, { name: "c", ...nested });
    expect(b.spec).toEqual(a.spec);
    expect(b.ignored).toEqual([]);
    expect(b.spec).toMatchObject(flat);
  });

  it.each([
    [1, true],
    [true, true],
    [0, false],
    [false, false],
  ])("isEtcdBackupEnabled %j is stored as %j", (input, stored) => {
    expect(create("v4", { name: "c", etcdBackup: { isEtcdBackupEnabled: input } }).spec.isEtcdBackupEnabled).toBe(
      stored,
    );
  });

  it("a disabled backup the way Go clients send it (zero values) sets nothing else", () => {
    const { spec, ignored } = create("v4", {
      name: "c",
      etcdBackup: { storageType: "", isEtcdBackupEnabled: 0, storageProperties: { localPath: "" }, intervalInMins: 0 },
    });
    expect(ignored).toEqual([]);
    expect(spec.isEtcdBackupEnabled).toBe(false);
    for (const key of ["storageType", "localPath", "intervalInMins"]) expect(key in spec).toBe(false);
  });

  it.each([
    [{ storageType: "s3" }, "etcdBackup.storageType"],
    [{ storageType: "local", storageProperties: { localPath: "rel/path" } }, "etcdBackup.storageProperties.localPath"],
    [{ dailyBackupTime: "25:00", maxTimestampBackupCount: 1 }, "etcdBackup.dailyBackupTime"],
    [{ intervalInMins: -1 }, "etcdBackup.intervalInMins"],
    [{ isEtcdBackupEnabled: "yes" }, "etcdBackup.isEtcdBackupEnabled"],
    [{ intervalInMins: 5 }, "etcdBackup.maxIntervalBackupCount"],
    [{ dailyBackupTime: "01:00" }, "etcdBackup.maxTimestampBackupCount"],
    [{ intervalInMins: 5, intervalInHours: 1, maxIntervalBackupCount: 1 }, "etcdBackup.intervalInHours"],
    [{ storageProperties: { localPath: "/x" } }, "etcdBackup.storageProperties.localPath"],
    [{ storageProperties: "x" }, "etcdBackup.storageProperties"],
  ])("errors in %j name %s", (etcdBackup, field) => {
    for (const version of VERSIONS) expect400(() => create(version, { name: "c", etcdBackup }), field);
  });

  it.each([[[]], ["x"], [5]])("etcdBackup %j that is not an object is a 400", (etcdBackup) => {
    expect400(() => create("v4", { name: "c", etcdBackup }), "etcdBackup");
  });

  it("null etcdBackup is nothing", () => {
    expect(create("v4", { name: "c", etcdBackup: null }).spec).toEqual(create("v4", { name: "c" }).spec);
  });

  it("a flat and a nested value that differ are a 400 naming the nested field", () => {
    const error = expect400(
      () =>
        create("v4", { name: "c", intervalInMins: 30, maxIntervalBackupCount: 2, etcdBackup: { intervalInMins: 60 } }),
      "etcdBackup.intervalInMins",
    );
    expect(error.message).toMatch(/contradicts intervalInMins/);
    expect400(
      () =>
        create("v3", {
          name: "c",
          localPath: "/a",
          storageType: "local",
          etcdBackup: { storageProperties: { localPath: "/b" } },
        }),
      "etcdBackup.storageProperties.localPath",
    );
    expect400(
      () => create("v4", { name: "c", isEtcdBackupEnabled: false, etcdBackup: { isEtcdBackupEnabled: 1 } }),
      "etcdBackup.isEtcdBackupEnabled",
    );
  });

  it("the same value given flat and nested (in either type) is fine", () => {
    const { spec } = create("v4", {
      name: "c",
      isEtcdBackupEnabled: true,
      intervalInMins: 30,
      maxIntervalBackupCount: 2,
      etcdBackup: { isEtcdBackupEnabled: 1, intervalInMins: 30 },
    });
    expect(spec).toMatchObject({ isEtcdBackupEnabled: true, intervalInMins: 30, storageType: "local" });
  });

  it("a zero value on one side does not contradict a value on the other", () => {
    const { spec } = create("v4", {
      name: "c",
      intervalInMins: 0,
      dailyBackupTime: "",
      maxIntervalBackupCount: 4,
      etcdBackup: { intervalInMins: 45, maxIntervalBackupCount: 0 },
    });
    expect(spec).toMatchObject({ intervalInMins: 45, maxIntervalBackupCount: 4 });
    expect("dailyBackupTime" in spec).toBe(false);
  });

  it("unknown and read-only nested keys are ignored with their dotted names, or a 400 when strict", () => {
    const body = {
      name: "c",
      etcdBackup: {
        isEtcdBackupEnabled: 1,
        taskStatus: "success",
        taskErrorDetail: "",
        storageProperties: { localPath: "/b", bucket: "x" },
      },
    };
    const { spec, ignored } = create("v4", body);
    expect(ignored).toEqual([
      "etcdBackup.taskStatus",
      "etcdBackup.taskErrorDetail",
      "etcdBackup.storageProperties.bucket",
    ]);
    expect(spec).toMatchObject({ isEtcdBackupEnabled: true, localPath: "/b" });
    const error = expect400(() => create("v4", body, true), "etcdBackup.taskStatus");
    expect(error.code).toBe("unknown_field");
  });
});

describe("fields a version does not take: ignored, or a 400 when strict", () => {
  it("v4 create ignores the v3-only fields without validating them", () => {
    const body = {
      name: "c",
      deployKubevirt: true,
      deployVendorOperator: "not even a flag",
      masterless: true,
      etcdHeartbeatIntervalMs: -5,
      etcdElectionTimeoutMs: 10,
      additionalAWSDiskSize: 20,
    };
    const { spec, ignored } = create("v4", body);
    expect(ignored).toEqual([
      "deployKubevirt",
      "deployVendorOperator",
      "masterless",
      "etcdHeartbeatIntervalMs",
      "etcdElectionTimeoutMs",
      "additionalAWSDiskSize",
    ]);
    for (const key of ignored) expect(key in spec).toBe(false);
  });

  it("v3 create ignores the v4-only fields; their defaults still apply", () => {
    const { spec, ignored } = create("v3", {
      name: "c",
      cpuManagerPolicy: "static",
      topologyManagerPolicy: "bogus",
      reservedCPUs: "nonsense",
      enableCatapultMonitoring: false,
      useHostname: true,
      dockerPrivateRegistry: "r.example.com",
    });
    expect(ignored).toEqual([
      "cpuManagerPolicy",
      "topologyManagerPolicy",
      "reservedCPUs",
      "enableCatapultMonitoring",
      "useHostname",
      "dockerPrivateRegistry",
    ]);
    expect(spec).toMatchObject({
      cpuManagerPolicy: "none",
      topologyManagerPolicy: "none",
      enableCatapultMonitoring: true,
    });
    expect("reservedCPUs" in spec).toBe(false);
  });

  it.each(VERSIONS)("%s create ignores read-only and unknown fields", (version) => {
    const body = {
      name: "c",
      uuid: "x",
      status: "ok",
      masterVipVrouterId: "7",
      taskStatus: "success",
      canUpgrade: true,
      etcdVersion: "3.5",
      ipv6: 0,
      monitoring: '{"retentionTime":"7d"}',
      calicoIPv4DetectionMethod: "first-found",
      deployLuigiOperator: true,
      apiServerFlags: ["--v=2"],
      customAmi: "update-only",
    };
    const { spec, ignored } = create(version, body);
    expect(ignored).toEqual(Object.keys(body).filter((k) => k !== "name"));
    expect(spec).toEqual(create(version, { name: "c" }).spec);
  });

  it.each(VERSIONS)("%s create with strict: an ignored field is a 400 unknown_field naming it", (version) => {
    const error = expect400(() => create(version, { name: "c", status: "ok", bogus: 1 }, true), "status");
    expect(error.code).toBe("unknown_field");
    expect(error.message).toContain("bogus");
    expect(error.message).toContain(version);
  });

  it("strict accepts a body of accepted fields", () => {
    expect(create("v4", { name: "c", cpuManagerPolicy: "static" }, true).ignored).toEqual([]);
    expect(create("v3", { name: "c", masterless: true }, true).ignored).toEqual([]);
  });

  it("an invalid value of an accepted field is a 400 even when the body also has unknown fields", () => {
    expect400(() => create("v4", { name: "c", bogus: 1, networkPlugin: "cilium" }), "networkPlugin");
  });
});

describe("masterNodes and workerNodes", () => {
  it.each(VERSIONS)("%s create returns them apart from the spec", (version) => {
    const { spec, masterNodes, workerNodes, ignored } = create(version, {
      name: "c",
      masterNodes: ["m1", "m2"],
      workerNodes: ["w1"],
    });
    expect(masterNodes).toEqual(["m1", "m2"]);
    expect(workerNodes).toEqual(["w1"]);
    expect(ignored).toEqual([]);
    expect("masterNodes" in spec).toBe(false);
  });

  it.each([
    [{ masterNodes: "m1" }, "masterNodes"],
    [{ workerNodes: [1] }, "workerNodes[0]"],
    [{ masterNodes: ["m1", "m1"] }, "masterNodes"],
    [{ masterNodes: ["m1"], workerNodes: ["w1", "m1"] }, "workerNodes"],
  ])("%j is a 400 naming %s", (body, field) => {
    expect400(() => create("v4", { name: "c", ...body }), field);
  });

  it("null or empty lists are no nodes", () => {
    const parsed = create("v4", { name: "c", masterNodes: null, workerNodes: [] });
    expect(parsed.masterNodes).toEqual([]);
    expect(parsed.workerNodes).toEqual([]);
  });

  it("are not accepted on update", () => {
    const current = create("v4", { name: "c" }).spec;
    expect(update("v4", current, { masterNodes: ["m1"] }).ignored).toEqual(["masterNodes"]);
  });
});

describe("cluster update", () => {
  const current = create("v4", {
    name: "c",
    numWorkers: 2,
    tags: { a: "1", b: "2" },
    intervalInMins: 30,
    maxIntervalBackupCount: 3,
    isEtcdBackupEnabled: true,
  }).spec;

  it("lists only the fields whose value changed", () => {
    const { changed, spec } = update("v4", current, { numWorkers: 2, tags: { b: "2", a: "1" }, certExpiryHrs: 48 });
    expect(changed).toEqual(["certExpiryHrs"]);
    expect(spec).toEqual({ ...current, certExpiryHrs: 48 });
  });

  it("an empty body changes nothing", () => {
    expect(update("v3", current, {})).toEqual({ spec: current, changed: [], ignored: [] });
  });

  it("does not modify the current spec object", () => {
    const copy = structuredClone(current);
    update("v4", current, { numWorkers: 9, tags: null });
    expect(current).toEqual(copy);
  });

  it("validates the merged result", () => {
    expect400(() => update("v4", current, { intervalInHours: 2 }), "intervalInHours", /mutually exclusive/);
    expect400(() => update("v4", current, { maxIntervalBackupCount: null }), "maxIntervalBackupCount");
    expect400(() => update("v4", current, { dailyBackupTime: "04:00" }), "maxTimestampBackupCount");
    const base = create("v4", { name: "c" }).spec;
    expect400(() => update("v3", base, { localPath: "/b" }), "localPath");
  });

  it("null or a zero value clears a field; a cleared default comes back", () => {
    const { spec, changed } = update(
      "v4",
      { ...current, certExpiryHrs: 48 },
      {
        intervalInMins: null,
        intervalInHours: 2,
        tags: {},
        certExpiryHrs: null,
      },
    );
    expect(spec.intervalInMins).toBeUndefined();
    expect(spec.intervalInHours).toBe(2);
    expect(spec.tags).toBeUndefined();
    expect(spec.certExpiryHrs).toBe(24);
    expect(changed.sort()).toEqual(["certExpiryHrs", "intervalInHours", "intervalInMins", "tags"]);
  });

  it("takes nested etcdBackup with the same rules", () => {
    const { spec } = update("v3", current, {
      etcdBackup: { intervalInMins: 0, intervalInHours: 6, dailyBackupTime: "02:00", maxTimestampBackupCount: 4 },
    });
    expect(spec).toMatchObject({ intervalInHours: 6, dailyBackupTime: "02:00", maxTimestampBackupCount: 4 });
    expect(spec.intervalInMins).toBeUndefined();
    expect400(() => update("v4", current, { etcdBackup: { storageType: "nfs" } }), "etcdBackup.storageType");
  });

  it("turning backups on with an interval needs its count", () => {
    const base = create("v4", { name: "c" }).spec;
    expect400(
      () => update("v4", base, { etcdBackup: { isEtcdBackupEnabled: 1, intervalInHours: 1 } }),
      "etcdBackup.maxIntervalBackupCount",
    );
    const ok = update("v4", base, {
      etcdBackup: { isEtcdBackupEnabled: 1, intervalInHours: 1, maxIntervalBackupCount: 2 },
    });
    expect(ok.spec).toMatchObject({ isEtcdBackupEnabled: true, storageType: "local", intervalInHours: 1 });
  });

  it.each([
    ["certExpiryHrs", 0],
    ["numWorkers", -1],
    ["tags", "x"],
    ["dailyBackupTime", "noon"],
  ])("an invalid %s (%j) is a 400", (field, value) => {
    expect400(() => update("v4", current, { [field]: value }), field);
  });

  it("numWorkers applies only while autoscaling is off; numMin/MaxWorkers only while it is on", () => {
    const cas = create("v4", { name: "c", enableCAS: true, numMinWorkers: 1, numMaxWorkers: 3, numWorkers: 2 }).spec;
    const onCas = update("v4", cas, { numWorkers: 5, numMaxWorkers: 6 });
    expect(onCas.spec).toMatchObject({ numWorkers: 2, numMaxWorkers: 6 });
    expect(onCas.ignored).toEqual(["numWorkers"]);
    expect400(() => update("v4", cas, { numMinWorkers: 7 }), "numMinWorkers", /numMaxWorkers/);

    const offCas = update("v3", current, { numWorkers: 5, numMinWorkers: 1 });
    expect(offCas.spec.numWorkers).toBe(5);
    expect(offCas.spec.numMinWorkers).toBeUndefined();
    expect(offCas.ignored).toEqual(["numMinWorkers"]);
    // Not applicable is not unknown: strict does not refuse it.
    expect(update("v3", current, { numMinWorkers: 1 }, true).ignored).toEqual(["numMinWorkers"]);
  });

  it("strict update refuses create-only and unknown fields", () => {
    const error = expect400(() => update("v4", current, { name: "new" }, true), "name");
    expect(error.code).toBe("unknown_field");
    expect(update("v4", current, { name: "new" }).ignored).toEqual(["name"]);
  });

  it("addonOperatorImageTag: v4 update checks it against the catalogue, v3 update ignores it", () => {
    expect(update("v4", current, { addonOperatorImageTag: operatorTag }).spec.addonOperatorImageTag).toBe(operatorTag);
    expect400(() => update("v4", current, { addonOperatorImageTag: "0.0.1" }), "addonOperatorImageTag");
    expect(update("v3", current, { addonOperatorImageTag: "0.0.1" }).ignored).toEqual(["addonOperatorImageTag"]);
  });

  it("a cluster on a role version since dropped from the catalogue can still be updated", () => {
    const old = { ...current, kubeRoleVersion: "1.20.0-kls.1" };
    expect(update("v4", old, { numWorkers: 3 }).spec.kubeRoleVersion).toBe("1.20.0-kls.1");
  });
});

describe("hostile input", () => {
  it("a tag named __proto__ stays a tag", () => {
    const { spec } = create("v4", JSON.parse('{"name":"c","tags":{"__proto__":"x","a":"b"}}'));
    expect(Object.keys(spec.tags ?? {})).toEqual(["__proto__", "a"]);
    expect(Object.getPrototypeOf(spec.tags)).toBe(Object.prototype);
  });

  it("__proto__ and constructor at the top level are unknown fields, not applied", () => {
    const { spec, ignored } = create(
      "v4",
      JSON.parse('{"name":"c","__proto__":{"networkPlugin":"x"},"constructor":1}'),
    );
    expect(ignored).toEqual(["__proto__", "constructor"]);
    expect(spec.networkPlugin).toBe("flannel");
  });
});
