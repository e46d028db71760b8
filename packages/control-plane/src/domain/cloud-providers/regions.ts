import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { badRequest } from "../../http/errors.ts";
import type { ProviderType } from "./provider-types.ts";

export interface Region {
  RegionName: string;
  Endpoint: string;
}

type RegionFile = Record<Exclude<ProviderType, "local" | "aws" | "azure">, Region[]>;

const file = join(dirname(fileURLToPath(import.meta.url)), "regions.json");
// Read once: the list is static data shipped with the code, not configuration.
const REGIONS = JSON.parse(readFileSync(file, "utf8")) as RegionFile;

/**
 * The regions of a provider type. The local provider builds clusters from hosts that were
 * attached by hand, so it has no regions: asking for them is a 400 (the request does not apply
 * to that provider) rather than a 404 (the provider does exist).
 */
export function regionsOf(type: string): Region[] {
  const regions = REGIONS[type as keyof RegionFile];
  if (!Array.isArray(regions)) {
    throw badRequest("uuid", `the ${type} provider has no regions; regions exist for public clouds only`, "no_regions");
  }
  return regions;
}
