import type { Keelson } from "./context.ts";
import { addonOperationKinds } from "./domain/addons/operations.ts";
import { awsOperationKinds } from "./domain/clusters/auto-deploy/aws-kinds.ts";
import { clusterOperationKinds, recordMembershipFailure } from "./domain/clusters/operations.ts";
import { rolloutOperationKinds } from "./domain/clusters/rollouts/rollout.ts";
import { hostUpgradeKind } from "./domain/hosts/agent-rollout.ts";

/** Every operation kind the runner knows. A kind recorded but unknown fails with a clear error. */
export function registerOperationKinds(keelson: Keelson): void {
  for (const kind of clusterOperationKinds(keelson)) keelson.runner.register(kind);
  for (const kind of awsOperationKinds(keelson, recordMembershipFailure(keelson))) keelson.runner.register(kind);
  for (const kind of rolloutOperationKinds(keelson)) keelson.runner.register(kind);
  for (const kind of addonOperationKinds(keelson)) keelson.runner.register(kind);
  keelson.runner.register(hostUpgradeKind(keelson));
}
