import type { Keelson } from "../../context.ts";
import type { OperationKind } from "../../operations/types.ts";

export function clusterOperationKinds(_keelson: Keelson): OperationKind[] {
  return [];
}
