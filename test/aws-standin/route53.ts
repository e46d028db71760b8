import { HOSTED_ZONES } from "./data.ts";
import { AwsError } from "./query.ts";
import { el, XML_DECLARATION } from "./xml.ts";

/**
 * STAND-IN, for tests: Route 53 (Amazon Route 53 API Reference, 2013-04-01, REST-XML):
 * ListHostedZones (`GET /2013-04-01/hostedzone`), ChangeResourceRecordSets (`POST
 * …/hostedzone/{Id}/rrset`, CREATE / UPSERT / DELETE, a batch applied whole or not at all, with
 * `InvalidChangeBatch` as Route 53 words it) and ListResourceRecordSets (`GET …/rrset`).
 * Record sets are not taggable on AWS; a test reads `records` to see what is left.
 */
export const ROUTE53_NAMESPACE = "https://route53.amazonaws.com/doc/2013-04-01/";

export interface RecordSet {
  zoneId: string;
  name: string;
  type: string;
  ttl?: number;
  values: string[];
  alias?: { hostedZoneId: string; dnsName: string };
}

export class Route53State {
  /** `zoneId|name|type` → record. */
  readonly records = new Map<string, RecordSet>();
  private changes = 0;
  nextChangeId(): string {
    return `/change/C${(++this.changes).toString().padStart(13, "0")}`;
  }
}

const text = (xml: string, name: string): string | undefined =>
  xml.match(new RegExp(`<${name}>([^<]*)</${name}>`))?.[1];
const all = (xml: string, name: string): string[] =>
  [...xml.matchAll(new RegExp(`<${name}>([\\s\\S]*?)</${name}>`, "g"))].map((m) => m[1] as string);

/** Route 53 stores names fully qualified, lower case, with the trailing dot. */
const fqdn = (name: string) => (name.endsWith(".") ? name : `${name}.`).toLowerCase();

function listZones(): string {
  const zones = HOSTED_ZONES.map((z) =>
    el("HostedZone", [
      el("Id", z.id),
      el("Name", z.name),
      el("CallerReference", `standin-${z.id.split("/").pop()}`),
      el("Config", [el("PrivateZone", z.privateZone)]),
      el("ResourceRecordSetCount", 2),
    ]),
  );
  return `${XML_DECLARATION}<ListHostedZonesResponse xmlns="${ROUTE53_NAMESPACE}">${el("HostedZones", zones)}${el("IsTruncated", false)}${el("MaxItems", 100)}</ListHostedZonesResponse>`;
}

function changeRecords(state: Route53State, zoneId: string, body: string): string {
  const next = new Map(state.records);
  for (const change of all(body, "Change")) {
    const action = text(change, "Action");
    const name = fqdn(text(change, "Name") ?? "");
    const type = text(change, "Type") ?? "";
    const key = `${zoneId}|${name}|${type}`;
    const described = `[name='${name}', type='${type}']`;
    if (action === "DELETE") {
      if (!next.has(key))
        throw new AwsError(
          400,
          "InvalidChangeBatch",
          `[Tried to delete resource record set ${described} but it was not found]`,
        );
      next.delete(key);
      continue;
    }
    if (action === "CREATE" && next.has(key)) {
      throw new AwsError(
        400,
        "InvalidChangeBatch",
        `[Tried to create resource record set ${described} but it already exists]`,
      );
    }
    const aliasXml = all(change, "AliasTarget")[0];
    const ttl = text(change, "TTL");
    next.set(key, {
      zoneId,
      name,
      type,
      values: all(change, "ResourceRecord").map((r) => text(r, "Value") ?? ""),
      ...(ttl ? { ttl: Number(ttl) } : {}),
      ...(aliasXml
        ? { alias: { hostedZoneId: text(aliasXml, "HostedZoneId") ?? "", dnsName: text(aliasXml, "DNSName") ?? "" } }
        : {}),
    });
  }
  state.records.clear();
  for (const [k, v] of next) state.records.set(k, v);
  const info = el("ChangeInfo", [
    el("Id", state.nextChangeId()),
    el("Status", "INSYNC"),
    el("SubmittedAt", new Date().toISOString()),
  ]);
  return `${XML_DECLARATION}<ChangeResourceRecordSetsResponse xmlns="${ROUTE53_NAMESPACE}">${info}</ChangeResourceRecordSetsResponse>`;
}

function listRecords(state: Route53State, zoneId: string): string {
  const sets = [...state.records.values()]
    .filter((r) => r.zoneId === zoneId)
    .map((r) =>
      el("ResourceRecordSet", [
        el("Name", r.name),
        el("Type", r.type),
        ...(r.ttl !== undefined ? [el("TTL", r.ttl)] : []),
        ...(r.alias
          ? [
              el("AliasTarget", [
                el("HostedZoneId", r.alias.hostedZoneId),
                el("DNSName", r.alias.dnsName),
                el("EvaluateTargetHealth", false),
              ]),
            ]
          : [
              el(
                "ResourceRecords",
                r.values.map((v) => el("ResourceRecord", [el("Value", v)])),
              ),
            ]),
      ]),
    );
  return `${XML_DECLARATION}<ListResourceRecordSetsResponse xmlns="${ROUTE53_NAMESPACE}">${el("ResourceRecordSets", sets)}${el("IsTruncated", false)}${el("MaxItems", 300)}</ListResourceRecordSetsResponse>`;
}

/** One Route 53 request: the whole XML answer. */
export function route53Action(state: Route53State, method: string, path: string, body: string): string {
  if (method === "GET" && path === "/2013-04-01/hostedzone") return listZones();
  const rrset = path.match(/^\/2013-04-01\/hostedzone\/([^/]+)\/rrset\/?$/);
  if (rrset) {
    const zoneId = rrset[1] as string;
    if (!HOSTED_ZONES.some((z) => z.id.endsWith(`/${zoneId}`))) {
      throw new AwsError(404, "NoSuchHostedZone", `No hosted zone found with ID: ${zoneId}`);
    }
    if (method === "POST") return changeRecords(state, zoneId, body);
    if (method === "GET") return listRecords(state, zoneId);
  }
  throw new AwsError(404, "UnknownOperationException", `No operation at ${method} ${path}`);
}
