import type { Catalogue, ParsedRoleVersion, RoleVersion } from "./catalogue.ts";

/**
 * One entry of `supportedRoleVersions`. Version parts are integers, as clients compare them
 * numerically to find the newest. `patchVersion` is the build number of Keelson's node package
 * for that Kubernetes patch (the N of `-kls.N`): the Kubernetes patch is `k8sPatchVersion`.
 * `addonsDetails` maps add-on name to version, the same shape as `addonversions`.
 */
export interface SupportedRole {
  uuid: string;
  k8sMajorVersion: number;
  k8sMinorVersion: number;
  k8sPatchVersion: number;
  patchVersion: number;
  roleVersion: string;
  addonsDetails: Record<string, string>;
  metadata: {
    containerRuntime: string;
    etcdVersion: string;
    nodePackage: { name: string; version: string; file: string };
  };
}

export interface SupportedRoleVersions {
  count: number;
  roles: SupportedRole[];
}

function presentRole(catalogue: Catalogue, role: RoleVersion): SupportedRole {
  const parsed = catalogue.parse(role.roleVersion) as ParsedRoleVersion;
  return {
    uuid: catalogue.uuidOf(role.roleVersion),
    k8sMajorVersion: parsed.major,
    k8sMinorVersion: parsed.minor,
    k8sPatchVersion: parsed.patch,
    patchVersion: parsed.build,
    roleVersion: role.roleVersion,
    addonsDetails: { ...role.addons },
    metadata: {
      containerRuntime: role.containerRuntime,
      etcdVersion: role.etcdVersion,
      nodePackage: { ...role.nodePackage },
    },
  };
}

/** Oldest first, so the last entry is the newest (existing clients pick `roles[-1]`). */
export function supportedRoleVersions(catalogue: Catalogue): SupportedRoleVersions {
  const roles = catalogue.roles.map((role) => presentRole(catalogue, role));
  return { count: roles.length, roles };
}
