import type { ProviderRecord } from "./cloud-providers.ts";

/**
 * The read shapes of a provider account per version (spec §2.3). They are built field by field
 * so that nothing else of the record (least of all credentials) can reach a response.
 */
export interface ProviderV4 {
  name: string;
  uuid: string;
  type: string;
  nodePoolUuid: string;
}

export interface ProviderV3 extends ProviderV4 {
  nodePoolName: string;
  projectID: string;
}

export function presentV4(p: ProviderRecord): ProviderV4 {
  return { name: p.name, uuid: p.id, type: p.type, nodePoolUuid: p.nodePoolId };
}

export function presentV3(p: ProviderRecord): ProviderV3 {
  return { ...presentV4(p), nodePoolName: p.nodePoolName, projectID: p.projectId };
}
