import type { Tx } from "@keelson/db";
import type { Keelson } from "../../../context.ts";
import type { OperationRow } from "../../../runner/types.ts";
import { CLUSTER_OPS } from "../operations.ts";
import { type ClusterTask, startClusterTask } from "../start-task.ts";
import { assertMembershipChangeable, type MembershipEntry, type MembershipPlan, planAttach } from "./attach.ts";
import { checkDetachEntries } from "./detach.ts";

type Action = "attach" | "detach";

interface Change {
  kind: string;
  verb: "attached" | "detached";
  mark: ClusterTask["mark"];
  /** The action's own rules and writes, in the transaction; what it returns adds to the mark. */
  plan: (
    tx: Tx,
    k: Keelson,
    projectId: string,
    clusterId: string,
    entries: MembershipEntry[],
  ) => Promise<{ plan: MembershipPlan; mark?: ClusterTask["mark"] }>;
}

const CHANGES: Record<Action, Change> = {
  attach: { kind: CLUSTER_OPS.attach, verb: "attached", mark: { lastOp: "attach" }, plan: planAttach },
  detach: {
    kind: CLUSTER_OPS.detach,
    verb: "detached",
    mark: { taskStatus: "updating", lastOp: "detach" },
    plan: async (tx, _k, projectId, clusterId, entries) => ({
      plan: await checkDetachEntries(tx, projectId, clusterId, entries),
    }),
  },
};

/**
 * `POST .../clusters/{uuid}/attach` and `.../detach` (and PUT nodes/{uuid} {clusterUuid: null},
 * a detach): one cluster task (see startClusterTask) whose transaction, with the cluster row
 * locked, checks that the cluster's membership may change, then the action's rules against the
 * rows as they are (for a detach, quorum above all), so two requests at once cannot each pass a
 * check the other one breaks. The plan's masters and workers are the operation's params.
 */
export async function changeMembership(
  k: Keelson,
  action: Action,
  projectId: string,
  clusterId: string,
  entries: MembershipEntry[],
): Promise<OperationRow> {
  const change = CHANGES[action];
  const started = await startClusterTask(k, {
    projectId,
    clusterId,
    kind: change.kind,
    mark: change.mark,
    first: async (tx, cluster) => {
      await assertMembershipChangeable(tx, cluster, change.verb);
      const { plan, mark } = await change.plan(tx, k, projectId, clusterId, entries);
      return { params: { masters: plan.masters, workers: plan.workers }, ...(mark ? { mark } : {}) };
    },
  });
  return started.operation;
}
