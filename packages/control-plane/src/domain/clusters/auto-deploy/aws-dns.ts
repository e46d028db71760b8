import { badRequest } from "../../../http/errors.ts";
import type { AwsAccount } from "../../cloud-providers/aws/clients.ts";
import { awsApi } from "../../cloud-providers/aws/load.ts";
import type { ClusterSpec } from "../spec/fields.ts";

/**
 * The API's DNS name on an AWS cluster (§2.1 `domainId`, `externalDnsName`, `useVendorDomain`):
 * the record goes in the Route 53 hosted zone `domainId` names (an id from the region detail's
 * `domains`), so a name needs a zone, the zone must be the account's, and the name must lie in
 * it; with `useVendorDomain` and no name, the name is generated as `<cluster name>.<zone>`.
 * Returns the spec with the name filled in; each broken rule is a 400 naming its field.
 */
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export async function resolveAwsDnsName(account: AwsAccount, spec: ClusterSpec): Promise<ClusterSpec> {
  const wanted = spec.externalDnsName !== undefined || spec.useVendorDomain === true;
  if (!wanted) return spec;
  const why = spec.externalDnsName !== undefined ? "externalDnsName is given" : "useVendorDomain is true";
  if (!spec.domainId) {
    throw badRequest("domainId", `domainId (a Route 53 hosted zone of the account) is required when ${why}`);
  }
  const id = spec.domainId.replace(/^\/hostedzone\//, "");
  const zone = (await (await awsApi()).awsHostedZones(account)).find((z) => z.id === id);
  if (!zone) throw badRequest("domainId", `domainId ${spec.domainId} is not a Route 53 hosted zone of this account`);
  const zoneName = zone.name.toLowerCase();
  if (spec.externalDnsName !== undefined) {
    const name = spec.externalDnsName.toLowerCase().replace(/\.$/, "");
    if (name === zoneName || !name.endsWith(`.${zoneName}`)) {
      throw badRequest(
        "externalDnsName",
        `externalDnsName ${spec.externalDnsName} must be a name inside the hosted zone ${zoneName} (domainId ${spec.domainId})`,
      );
    }
    return { ...spec, domainId: id, externalDnsName: name };
  }
  const label = spec.name.toLowerCase();
  if (!LABEL.test(label)) {
    throw badRequest(
      "name",
      `with useVendorDomain the API's name is <cluster name>.${zoneName}, so the name must be a DNS label (letters, digits, '-'; at most 63): give externalDnsName instead`,
    );
  }
  return { ...spec, domainId: id, externalDnsName: `${label}.${zoneName}` };
}
