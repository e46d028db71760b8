import type { Keelson } from "../../../context.ts";
import type { OperationKind, StepContext } from "../../../runner/types.ts";
import { CLUSTER_OPS } from "../operations.ts";

/**
 * The auto-deploy kinds, registered at start without loading their steps: aws-operations.ts
 * imports the AWS SDK's clients, which a server that never deploys on AWS should not carry from
 * its start (aws/load.ts says what they cost). The steps load with the first such operation.
 */
export function awsOperationKinds(
  k: Keelson,
  onFailed: (ctx: StepContext, error: Error) => Promise<void>,
): OperationKind[] {
  const kind = (name: string): OperationKind => ({
    kind: name,
    keepProgress: true,
    steps: async () => (await import("./aws-operations.ts")).awsSteps(k, name),
    onFailed,
  });
  return [kind(CLUSTER_OPS.awsCreate), kind(CLUSTER_OPS.awsDelete), kind(CLUSTER_OPS.awsResize)];
}
