import { conflict } from "../../http/errors.ts";
import type { Catalogue, RoleVersion } from "./catalogue.ts";

/** Orders dotted versions numerically (0.10.0 after 0.9.0); non-numeric parts compare as text. */
export function compareDotted(a: string, b: string): number {
  const pa = a.split(/[.+-]/);
  const pb = b.split(/[.+-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? "";
    const y = pb[i] ?? "";
    const nx = Number(x);
    const ny = Number(y);
    const diff = x !== "" && y !== "" && Number.isInteger(nx) && Number.isInteger(ny) ? nx - ny : x.localeCompare(y);
    if (diff !== 0) return diff;
  }
  return 0;
}

function roleOf(catalogue: Catalogue, roleVersion: string): RoleVersion {
  const role = catalogue.find(roleVersion);
  // A catalogue update can drop a version that running clusters still use; say so rather than guess.
  if (!role)
    throw conflict(`the cluster's role version ${roleVersion} is no longer in the catalogue`, "unknown_role_version");
  return role;
}

/** `addonversions`: add-on name -> version shipped with the cluster's role version. */
export function addonVersionsOf(catalogue: Catalogue, roleVersion: string): Record<string, string> {
  return { ...roleOf(catalogue, roleVersion).addons };
}

/**
 * `suppotedaddonversions`: for each add-on, every version the cluster can run, that is, the
 * versions shipped with the role versions it runs now or can upgrade to (Catalogue.reachableFrom),
 * oldest first.
 */
export function supportedAddonVersionsOf(catalogue: Catalogue, roleVersion: string): Record<string, string[]> {
  roleOf(catalogue, roleVersion);
  const versions = new Map<string, Set<string>>();
  for (const role of catalogue.reachableFrom(roleVersion)) {
    for (const [name, version] of Object.entries(role.addons)) {
      const set = versions.get(name) ?? new Set<string>();
      set.add(version);
      versions.set(name, set);
    }
  }
  return Object.fromEntries([...versions].map(([name, set]) => [name, [...set].sort(compareDotted)]));
}

/**
 * `supportedaddonoperatorversions`: the add-on operator image tags of the catalogue, oldest first.
 * Every tag works with every role version of the catalogue, so the list does not depend on the cluster.
 */
export function supportedAddonOperatorTags(catalogue: Catalogue): string[] {
  return [...catalogue.file.addonOperatorTags].sort(compareDotted);
}
