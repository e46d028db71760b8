import type { Keelson } from "../context.ts";
import { addonOperationKinds } from "../domain/addons/operations.ts";
import { clusterOperationKinds } from "../domain/clusters/operations.ts";

/** Every operation kind the runner knows. A kind recorded but unknown fails with a clear error. */
export function registerOperationKinds(keelson: Keelson): void {
  for (const kind of clusterOperationKinds(keelson)) keelson.runner.register(kind);
  for (const kind of addonOperationKinds(keelson)) keelson.runner.register(kind);
}
