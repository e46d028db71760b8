import { badRequest, conflict } from "../../http/errors.ts";

/** The two API versions that expose cloud providers; v1 only has the update. */
export type ApiVersion = "v3" | "v4";

export type ProviderType = "local" | "aws" | "azure" | "gcp";

/** The built-in type: one per project, seeded with the project, never created or deleted by a caller. */
export const LOCAL_TYPE = "local";

/**
 * What each version supports (spec §2.3): v4 creates aws besides local; v3 creates aws, azure
 * and gcp besides local. `types` lists local too, because it is a type clusters can use.
 */
const CREATABLE: Record<ApiVersion, readonly ProviderType[]> = {
  v4: ["aws"],
  v3: ["aws", "azure", "gcp"],
};

export function providerTypes(version: ApiVersion): ProviderType[] {
  return [LOCAL_TYPE, ...CREATABLE[version]];
}

export function creatableTypes(version: ApiVersion): readonly ProviderType[] {
  return CREATABLE[version];
}

/**
 * The type of a create or validate body, checked against what `version` can create. The local
 * provider exists already in every project, so asking for another one is a conflict, not a typo.
 */
export function requireCreatableType(version: ApiVersion, type: string): Exclude<ProviderType, "local"> {
  const allowed = CREATABLE[version];
  if (type === LOCAL_TYPE) {
    throw conflict(
      `the built-in local provider exists in every project and cannot be created again; ${version} creates: ${allowed.join(", ")}`,
      "builtin_provider",
    );
  }
  if (!(allowed as readonly string[]).includes(type)) {
    throw badRequest(
      "type",
      `type "${type.slice(0, 40)}" cannot be created in ${version}; ${version} creates: ${allowed.join(", ")}`,
    );
  }
  return type as Exclude<ProviderType, "local">;
}
