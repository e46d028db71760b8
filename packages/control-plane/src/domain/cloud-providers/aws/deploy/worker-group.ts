import {
  type AutoScalingGroupsType,
  DescribeAutoScalingGroupsCommand,
  TerminateInstanceInAutoScalingGroupCommand,
  UpdateAutoScalingGroupCommand,
} from "@aws-sdk/client-auto-scaling";
import { workerGroupName } from "./create.ts";
import { type DeployTarget, send } from "./target.ts";

/**
 * A cluster's worker Auto Scaling group as a shrink sees it, and the shrink itself: Keelson
 * names the instances to remove (the group's own scale-in would pick by zone and age, and the
 * hosts it took would be gone before they left the cluster), and each goes with
 * TerminateInstanceInAutoScalingGroup and the desired capacity decremented, so the group
 * launches no replacement.
 */
export interface WorkerGroup {
  minSize: number;
  desired: number;
  /** The instances the group holds and is not already terminating. */
  instances: string[];
}

/** Lifecycle states of an instance on its way out of the group (it must not be terminated again). */
const LEAVING = /^(Terminating|Terminated|Detaching|Detached)/;

export async function describeWorkerGroup(target: DeployTarget): Promise<WorkerGroup | undefined> {
  const found = await send<AutoScalingGroupsType>(
    target,
    "autoscaling",
    new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [workerGroupName(target.clusterId)] }),
  );
  const group = found?.AutoScalingGroups?.[0];
  if (!group) return undefined;
  return {
    minSize: group.MinSize ?? 0,
    desired: group.DesiredCapacity ?? 0,
    instances: (group.Instances ?? [])
      .filter((i) => !LEAVING.test(i.LifecycleState ?? ""))
      .map((i) => i.InstanceId as string),
  };
}

/**
 * Terminates those of `instanceIds` the group still holds, one call each, and reports each to
 * `terminated` (the operation saves it) before the next. Safe to run again after a crash: an
 * instance terminated before it is no longer the group's, so it is not asked for twice. The
 * group's MinSize is first lowered as far as the decrements take the desired capacity, which
 * AWS otherwise refuses ("Terminating instance without replacement will violate group's min
 * size constraint"); the resize that follows sets the final sizes.
 */
export async function terminateWorkers(
  target: DeployTarget,
  instanceIds: readonly string[],
  terminated: (instanceId: string) => Promise<void>,
): Promise<void> {
  const group = await describeWorkerGroup(target);
  if (!group) return;
  const todo = instanceIds.filter((id) => group.instances.includes(id));
  if (todo.length === 0) return;
  const floor = group.desired - todo.length;
  if (group.minSize > floor) {
    await send(
      target,
      "autoscaling",
      new UpdateAutoScalingGroupCommand({
        AutoScalingGroupName: workerGroupName(target.clusterId),
        MinSize: Math.max(floor, 0),
      }),
    );
  }
  for (const id of todo) {
    await send(
      target,
      "autoscaling",
      new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: id, ShouldDecrementDesiredCapacity: true }),
    );
    await terminated(id);
  }
}
