import { createHash } from "node:crypto";
import { INSTANCE_TYPES, imagesOf, STANDIN_REGIONS, vpcsOf, zonesOf } from "./data.ts";
import { describeCreatedSubnets, describeCreatedVpcs, ec2DeployAction, subnetFields } from "./ec2-deploy.ts";
import { ec2TemplateAction } from "./ec2-templates.ts";
import { tagsMatch } from "./tags.ts";
import { World } from "./world.ts";
import { el, items } from "./xml.ts";

/**
 * STAND-IN, for tests: the EC2 actions Keelson calls, in EC2's query protocol (Amazon EC2 API
 * Reference, API version 2016-11-15: form-encoded `Action=…&Version=…`, numbered list members
 * `Name.1`, `Filter.1.Name` / `Filter.1.Value.1`, answers `<ActionResponse>` with `<item>` lists).
 * Each action answers the XML elements the reference shows for it; unknown parameters are not
 * refused (EC2 ignores none, but Keelson sends only documented ones, and the SDK writes them).
 */
export const EC2_NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/";

export interface KeyPair {
  keyPairId: string;
  keyName: string;
  keyFingerprint: string;
  keyType: string;
}

export class Ec2Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** `Prefix.1`, `Prefix.2`, … in order. */
export function listParam(params: URLSearchParams, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 1; params.has(`${prefix}.${i}`); i++) out.push(params.get(`${prefix}.${i}`) as string);
  return out;
}

export function filters(params: URLSearchParams): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (let i = 1; params.has(`Filter.${i}.Name`); i++) {
    out.set(params.get(`Filter.${i}.Name`) as string, listParam(params, `Filter.${i}.Value`));
  }
  return out;
}

/** EC2 filter values take `*` and `?` wildcards. */
function wildcard(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

export function matches(values: string[] | undefined, actual: string): boolean {
  return values === undefined || values.some((v) => wildcard(v).test(actual));
}

const nameTag = (name: string | undefined) => (name ? items("tagSet", [[el("key", "Name"), el("value", name)]]) : "");

/** What one account holds that changes: key pairs per region. */
export class Ec2State {
  /** What deploys create (shared with the other deploy-time services). */
  readonly world = new World();
  readonly keyPairs = new Map<string, Map<string, KeyPair>>(STANDIN_REGIONS.map((r) => [r, new Map()]));
  private nextId = 1;

  importKeyPair(region: string, name: string, material: string): KeyPair {
    const pairs = this.keyPairs.get(region) as Map<string, KeyPair>;
    if (pairs.has(name)) {
      throw new Ec2Error(400, "InvalidKeyPair.Duplicate", `The keypair '${name}' already exists.`);
    }
    const [type, blob] = material.trim().split(/\s+/);
    if (!type || !blob || !/^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(256|384|521))$/.test(type)) {
      throw new Ec2Error(400, "InvalidKey.Format", "Key is not in valid OpenSSH public key format");
    }
    const digest = createHash("md5").update(Buffer.from(blob, "base64")).digest("hex");
    const pair = {
      keyPairId: `key-${(this.nextId++).toString(16).padStart(17, "0")}`,
      keyName: name,
      keyFingerprint: digest.match(/../g)?.join(":") ?? digest,
      keyType: type === "ssh-rsa" ? "rsa" : type === "ssh-ed25519" ? "ed25519" : "ecdsa",
    };
    pairs.set(name, pair);
    return pair;
  }
}

function describeInstanceTypes(params: URLSearchParams): string {
  const max = Number(params.get("MaxResults") ?? 100);
  if (!Number.isInteger(max) || max < 5 || max > 100) {
    throw new Ec2Error(400, "InvalidParameterValue", `Value ( ${max} ) for parameter maxResults is invalid.`);
  }
  const start = Number(params.get("NextToken") ?? 0);
  const page = INSTANCE_TYPES.slice(start, start + max);
  const next = start + max < INSTANCE_TYPES.length ? el("nextToken", String(start + max)) : "";
  return (
    items(
      "instanceTypeSet",
      page.map((t) => [
        el("instanceType", t.instanceType),
        el("vCpuInfo", [el("defaultVCpus", t.vcpus)]),
        el("memoryInfo", [el("sizeInMiB", t.memoryMiB)]),
        el("processorInfo", [items("supportedArchitectures", [[t.architecture]])]),
      ]),
    ) + next
  );
}

function describeImages(region: string, params: URLSearchParams): string {
  const owners = listParam(params, "Owner");
  const byFilter = filters(params);
  const images = imagesOf(region).filter(
    (image) =>
      (owners.length === 0 || owners.includes(image.ownerId)) &&
      matches(byFilter.get("name"), image.name) &&
      matches(byFilter.get("architecture"), image.architecture) &&
      matches(byFilter.get("state"), "available"),
  );
  return items(
    "imagesSet",
    images.map((image) => [
      el("imageId", image.imageId),
      el("imageLocation", `${image.ownerId}/${image.name}`),
      el("imageState", "available"),
      el("imageOwnerId", image.ownerId),
      el("creationDate", image.creationDate),
      el("isPublic", true),
      el("architecture", image.architecture),
      el("imageType", "machine"),
      el("name", image.name),
      el("description", image.description),
      el("rootDeviceType", "ebs"),
      el("virtualizationType", "hvm"),
    ]),
  );
}

function describeSubnets(world: World, region: string, params: URLSearchParams): string {
  const byFilter = filters(params);
  const ids = listParam(params, "SubnetId");
  const { subnets } = vpcsOf(region);
  return items("subnetSet", [
    ...subnets
      .filter(
        (s) =>
          matches(byFilter.get("vpc-id"), s.vpcId) &&
          (ids.length === 0 || ids.includes(s.subnetId)) &&
          tagsMatch(new Map(), byFilter),
      )
      .map((s) => subnetFields(s, "")),
    ...describeCreatedSubnets(world, region, params),
  ]);
}

/** One EC2 action in `region`; the XML inside `<ActionResponse>` after the request id. */
export function ec2Action(state: Ec2State, region: string, params: URLSearchParams): string {
  const action = params.get("Action");
  if (!(STANDIN_REGIONS as readonly string[]).includes(region)) {
    // Signed for a region this account does not have enabled (an opt-in region, for example).
    throw new Ec2Error(401, "AuthFailure", "AWS was not able to validate the provided access credentials");
  }
  switch (action) {
    case "DescribeRegions": {
      const wanted = listParam(params, "RegionName");
      return items(
        "regionInfo",
        STANDIN_REGIONS.filter((r) => wanted.length === 0 || wanted.includes(r)).map((r) => [
          el("regionName", r),
          el("regionEndpoint", `ec2.${r}.amazonaws.com`),
          el("optInStatus", "opt-in-not-required"),
        ]),
      );
    }
    case "DescribeAvailabilityZones":
      return items(
        "availabilityZoneInfo",
        zonesOf(region).map((zone, i) => [
          el("zoneName", zone),
          el("zoneState", "available"),
          el("regionName", region),
          el("zoneId", `${region.replace(/-/g, "").slice(0, 4)}-az${i + 1}`),
          el("zoneType", "availability-zone"),
          el("optInStatus", "opt-in-not-required"),
        ]),
      );
    case "DescribeInstanceTypes":
      return describeInstanceTypes(params);
    case "DescribeKeyPairs":
      return items(
        "keySet",
        [...(state.keyPairs.get(region)?.values() ?? [])].map((k) => [
          el("keyPairId", k.keyPairId),
          el("keyName", k.keyName),
          el("keyFingerprint", k.keyFingerprint),
          el("keyType", k.keyType),
        ]),
      );
    case "ImportKeyPair": {
      const name = params.get("KeyName");
      const material = params.get("PublicKeyMaterial");
      if (!name || !material) {
        throw new Ec2Error(
          400,
          "MissingParameter",
          `The request must contain the parameter ${name ? "PublicKeyMaterial" : "KeyName"}`,
        );
      }
      const pair = state.importKeyPair(region, name, Buffer.from(material, "base64").toString("utf8"));
      return [
        el("keyFingerprint", pair.keyFingerprint),
        el("keyName", pair.keyName),
        el("keyPairId", pair.keyPairId),
      ].join("");
    }
    case "DescribeImages":
      return describeImages(region, params);
    case "DescribeVpcs": {
      const ids = listParam(params, "VpcId");
      const own = vpcsOf(region).vpcs.filter(
        (v) =>
          (ids.length === 0 || ids.includes(v.vpcId)) &&
          tagsMatch(new Map(v.name ? [["Name", v.name]] : []), filters(params)),
      );
      return items("vpcSet", [
        ...own.map((v) => [
          el("vpcId", v.vpcId),
          el("state", "available"),
          el("cidrBlock", v.cidrBlock),
          el("isDefault", v.isDefault),
          nameTag(v.name),
        ]),
        ...describeCreatedVpcs(state.world, region, params),
      ]);
    }
    case "DescribeSubnets":
      return describeSubnets(state.world, region, params);
    default: {
      const answer =
        ec2DeployAction(state.world, region, action ?? "", params) ??
        ec2TemplateAction(state.world, action ?? "", params);
      if (answer !== undefined) return answer;
      throw new Ec2Error(400, "InvalidAction", `The action ${action} is not valid for this web service.`);
    }
  }
}
