import { badRequest } from "../../http/errors.ts";

/** A region as the provider detail lists it (spec §2.3): each cloud's module maps its own to this. */
export interface Region {
  RegionName: string;
  Endpoint: string;
}

/**
 * The local provider builds clusters from hosts that were attached by hand, so it has no regions:
 * asking for them is a 400 (the request does not apply to that provider) rather than a 404 (the
 * provider does exist). Every cloud lists its regions from the cloud itself (cloud-checks.ts).
 */
export function noRegions(type: string): never {
  throw badRequest("uuid", `the ${type} provider has no regions; regions exist for public clouds only`, "no_regions");
}
