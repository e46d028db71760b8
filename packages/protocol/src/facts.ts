import { type Static, Type } from "typebox";

/**
 * Host facts an agent reports in `hello` and in `facts` frames when they change. Bounded
 * lengths and counts keep one host from filling the control plane's database.
 */
const Text = (maxLength = 255) => Type.String({ maxLength });
const Count = Type.Integer({ minimum: 0 });

export const OsFacts = Type.Object(
  {
    /** "linux", "darwin", ... (process.platform). */
    platform: Text(32),
    /** Distribution family, e.g. "debian", "rhel" (os-release ID_LIKE or ID). */
    family: Text(64),
    /** Distribution name, e.g. "Ubuntu". */
    distro: Text(),
    /** Distribution version, e.g. "22.04". */
    release: Text(),
    codename: Type.Optional(Text()),
    kernel: Text(),
  },
  { additionalProperties: false },
);

export const DiskFacts = Type.Object(
  {
    /** Device name, e.g. "/dev/sda" or "nvme0n1". */
    name: Text(),
    /** "HD", "SSD", "NVMe", ... as reported; "" when unknown. */
    type: Text(64),
    sizeBytes: Count,
  },
  { additionalProperties: false },
);

export const InterfaceFacts = Type.Object(
  {
    name: Text(64),
    mac: Text(64),
    /** IPv4 and IPv6 addresses without prefix length. */
    addresses: Type.Array(Text(64), { maxItems: 64 }),
  },
  { additionalProperties: false },
);

/**
 * Something wrong on the host that leaves the agent working: `state_dir_full`, its state dir's
 * disk full (state files keep their last whole content; the link and the node's phases go on).
 */
export const HostCondition = Type.Object(
  {
    code: Type.Union([Type.Literal("state_dir_full")]),
    message: Text(1024),
    /** When the agent first saw it (ISO 8601). */
    since: Text(64),
  },
  { additionalProperties: false },
);
export type HostCondition = Static<typeof HostCondition>;

export const HostFacts = Type.Object(
  {
    hostname: Text(253),
    os: OsFacts,
    /** CPU architecture as Node reports it: "x64", "arm64", ... */
    arch: Text(32),
    cpu: Type.Object({ model: Text(), count: Count }, { additionalProperties: false }),
    memory: Type.Object({ totalBytes: Count }, { additionalProperties: false }),
    disks: Type.Array(DiskFacts, { maxItems: 256 }),
    interfaces: Type.Array(InterfaceFacts, { maxItems: 256 }),
    /** Address chosen by the default route unless overridden (KEELSON_PRIMARY_IP). */
    primaryIp: Text(64),
    agentVersion: Text(128),
    /** Absent while nothing is wrong (and older agents never send it). */
    conditions: Type.Optional(Type.Array(HostCondition, { maxItems: 8 })),
  },
  { additionalProperties: false },
);
export type HostFacts = Static<typeof HostFacts>;
