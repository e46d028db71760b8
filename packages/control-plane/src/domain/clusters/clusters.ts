import { randomUUID } from "node:crypto";
import {
  addons,
  cloudProviders,
  clusters,
  type Db,
  firstRow,
  lockRows,
  nodePools,
  nodes,
  one,
  type Tx,
} from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { ApiError, badRequest, conflict } from "../../http/errors.ts";
import { createClusterCa } from "../../pki/cluster-ca.ts";
import { recordOperation } from "../../runner/store.ts";
import type { OperationRow } from "../../runner/types.ts";
import { storedAccount } from "../cloud-providers/cloud-checks.ts";
import { agentInstallCommand } from "../install/agent-install.ts";
import { resolveAwsDnsName } from "./auto-deploy/aws-dns.ts";
import { checkAwsCreate } from "./auto-deploy/aws-spec.ts";
import type { AwsCreateParams } from "./auto-deploy/aws-token.ts";
import { assertNotDeleting } from "./deleting.ts";
import { assignNodes, checkAttachEntries, type MembershipPlan } from "./membership/attach.ts";
import { chooseVrouterId } from "./membership/vrrp.ts";
import { CLUSTER_OPS } from "./operations.ts";
import { assertNotBusy } from "./rollouts/rollout.ts";
import type { ApiVersion, ClusterSpec } from "./spec/fields.ts";
import { parseClusterCreate, parseClusterUpdate } from "./spec/spec.ts";
import { startClusterTask } from "./start-task.ts";
import type { ClusterRow } from "./views.ts";

export interface WriteOptions {
  version: ApiVersion;
  /** `?fieldValidation=Strict`: fields the version does not take are a 400 instead of a warning. */
  strict: boolean;
  /** Where an auto deploy's hosts register: KEELSON_PUBLIC_URL, else the address the request came to. */
  controlPlane?: string;
}

export interface WriteResult {
  cluster: ClusterRow;
  operation: OperationRow;
  /** Fields that were not applied; the route reports them in `Warning` headers. */
  ignored: string[];
}

interface Placement {
  nodePoolId: string;
  cloudProviderId: string;
  providerType: string;
}

/** The node pool a cluster goes on: the one named, else the project's built-in local pool. */
async function resolvePlacement(db: Db, projectId: string, nodePoolUuid: string | undefined): Promise<Placement> {
  const base = db
    .select({ nodePoolId: nodePools.id, cloudProviderId: cloudProviders.id, providerType: cloudProviders.type })
    .from(nodePools)
    .innerJoin(cloudProviders, eq(nodePools.cloudProviderId, cloudProviders.id));
  const row = firstRow(
    await (nodePoolUuid
      ? base.where(and(eq(nodePools.id, nodePoolUuid), eq(nodePools.projectId, projectId)))
      : base.where(and(eq(cloudProviders.type, "local"), eq(nodePools.projectId, projectId)))),
  );
  if (!row) {
    if (nodePoolUuid) throw badRequest("nodePoolUuid", `node pool ${nodePoolUuid} is not a node pool of this project`);
    throw new ApiError(500, "internal", "project has no local node pool");
  }
  return row;
}

/**
 * Nodes named at create (`masterNodes`, `workerNodes`) follow the attach rules of attach.ts
 * against a cluster with no masters yet; an unknown node is a 400 naming the body field.
 */
async function checkNamedNodes(
  k: Keelson,
  db: Tx,
  projectId: string,
  masterNodes: string[],
  workerNodes: string[],
): Promise<MembershipPlan> {
  const entries = [
    ...masterNodes.map((uuid, i) => ({ uuid, isMaster: true, field: `masterNodes[${i}]` })),
    ...workerNodes.map((uuid, i) => ({ uuid, isMaster: false, field: `workerNodes[${i}]` })),
  ];
  return checkAttachEntries(db, k.agents, projectId, entries, { unknownNode: 400, existingMasters: 0 });
}

async function assertNameFree(db: Tx, projectId: string, name: string): Promise<void> {
  const clash = firstRow(
    await db
      .select({ id: clusters.id })
      .from(clusters)
      .where(and(eq(clusters.projectId, projectId), eq(clusters.name, name))),
  );
  if (clash) throw conflict(`a cluster named "${name}" already exists in this project`, "duplicate_name");
}

/**
 * A cluster on a cloud node pool is auto-deployed: on AWS, after the checks of aws-spec.ts, by
 * the operation of aws-operations.ts (its params returned here); other clouds are refused.
 */
async function checkAutoDeploy(
  k: Keelson,
  placement: Placement,
  spec: ClusterSpec,
  parsed: { masterNodes: string[]; workerNodes: string[] },
  options: WriteOptions,
): Promise<{ params: AwsCreateParams; spec: ClusterSpec } | undefined> {
  if (placement.providerType === "local") return undefined;
  if (placement.providerType !== "aws") {
    throw badRequest(
      "nodePoolUuid",
      `node pool ${placement.nodePoolId} belongs to a ${placement.providerType} cloud provider: auto deploy runs on aws ` +
        "node pools (and manual deploy on the local one)",
      "auto_deploy_unavailable",
    );
  }
  checkAwsCreate(spec, parsed.masterNodes.length + parsed.workerNodes.length);
  const controlPlane = options.controlPlane ?? k.settings.publicUrl;
  // The hosts must be able to trust where they register (probed with a stand-in token).
  if (!controlPlane || !agentInstallCommand(controlPlane, k.tls?.caCertHash ?? null, "kjt_probe")) {
    throw badRequest(
      "nodePoolUuid",
      `cloud hosts cannot be told to trust ${controlPlane ?? "this control plane"}: serve TLS (or set KEELSON_PUBLIC_URL to its TLS address)`,
      "auto_deploy_unavailable",
    );
  }
  // Last, as it asks the cloud: the API's DNS name and its hosted zone.
  const resolved = await resolveAwsDnsName(await storedAccount(k, placement.cloudProviderId), spec);
  return { params: { controlPlane }, spec: resolved };
}

async function getProviderType(db: Db, projectId: string, clusterId: string): Promise<string | undefined> {
  const row = firstRow(
    await db
      .select({ type: cloudProviders.type })
      .from(clusters)
      .innerJoin(cloudProviders, eq(cloudProviders.id, clusters.cloudProviderId))
      .where(and(eq(clusters.id, clusterId), eq(clusters.projectId, projectId))),
  );
  return row?.type;
}

export async function createCluster(
  k: Keelson,
  projectId: string,
  body: unknown,
  options: WriteOptions,
): Promise<WriteResult> {
  const parsed = parseClusterCreate(options.version, body, { catalogue: k.catalogue, strict: options.strict });
  const placement = await resolvePlacement(k.db, projectId, parsed.spec.nodePoolUuid);
  const autoDeploy = await checkAutoDeploy(k, placement, parsed.spec, parsed, options);
  const spec = autoDeploy?.spec ?? parsed.spec;
  const plan = await checkNamedNodes(k, k.db, projectId, parsed.masterNodes, parsed.workerNodes);
  await assertNameFree(k.db, projectId, spec.name);

  const id = randomUUID();
  // Key generation is async (WebCrypto), so it happens before the synchronous transaction.
  const ca = await createClusterCa(spec.name, id);
  const { cluster, operation } = await k.db.transaction(async (tx) => {
    await assertNameFree(tx, projectId, spec.name);
    if (plan.masters.length + plan.workers.length > 0) {
      // Checked again with the hosts locked: one attached meanwhile gets the same 400 as before.
      await lockRows(tx, nodes, inArray(nodes.id, [...plan.masters, ...plan.workers]));
      await checkNamedNodes(k, tx, projectId, parsed.masterNodes, parsed.workerNodes);
    }
    const cluster = one(
      await tx
        .insert(clusters)
        .values({
          id,
          projectId,
          name: spec.name,
          nodePoolId: placement.nodePoolId,
          cloudProviderId: placement.cloudProviderId,
          kubeRoleVersion: spec.kubeRoleVersion,
          // With masters named or launched, the cluster is being created until the first one is ok.
          status: plan.masters.length > 0 || autoDeploy ? "creating" : "pending",
          taskStatus: "creating",
          lastOp: "create",
          masterVipVrouterId: spec.masterVipIpv4 ? await chooseVrouterId(tx) : "",
          spec: { ...spec, nodePoolUuid: placement.nodePoolId },
          caCertPem: ca.certPem,
          caKeyEnc: k.cipher.encrypt(ca.keyPem),
        })
        .returning(),
    );
    // The role version's add-ons are the cluster's from the start; DELETE .../addons removes them.
    const addonVersions = k.catalogue.find(spec.kubeRoleVersion)?.addons ?? {};
    const addonRows = Object.entries(addonVersions).map(([name, version]) => ({
      id: randomUUID(),
      clusterId: id,
      name,
      version,
    }));
    if (addonRows.length > 0) await tx.insert(addons).values(addonRows);
    await assignNodes(tx, id, plan);
    const operation = await recordOperation(tx, {
      projectId,
      targetType: "cluster",
      targetId: id,
      ...(autoDeploy
        ? { kind: CLUSTER_OPS.awsCreate, params: autoDeploy.params }
        : { kind: CLUSTER_OPS.create, params: { masterNodes: parsed.masterNodes, workerNodes: parsed.workerNodes } }),
    });
    return { cluster, operation };
  });
  k.runner.enqueue(operation);
  return { cluster, operation, ignored: parsed.ignored };
}

/** The fields whose change on an auto-deployed cluster resizes its worker group (§2.1). */
const WORKER_SIZES: readonly string[] = ["numWorkers", "numMinWorkers", "numMaxWorkers"];

export async function updateCluster(
  k: Keelson,
  projectId: string,
  clusterId: string,
  body: unknown,
  options: WriteOptions,
): Promise<WriteResult> {
  let ignored: string[] = [];
  const onAws = (await getProviderType(k.db, projectId, clusterId)) === "aws";
  // Parsed against the spec as it is under the row lock: two updates at once each keep the
  // other's changes.
  const { cluster, operation } = await startClusterTask(k, {
    projectId,
    clusterId,
    kind: CLUSTER_OPS.update,
    mark: { taskStatus: "updating", lastOp: "update" },
    first: async (tx, current) => {
      await assertNotDeleting(tx, current);
      const parsed = parseClusterUpdate(options.version, body, current.spec, {
        catalogue: k.catalogue,
        strict: options.strict,
      });
      ignored = parsed.ignored;
      const resize = onAws && parsed.changed.some((field) => WORKER_SIZES.includes(field));
      // The group is the create's: a resize waits until no other task (the create) runs.
      if (resize) await assertNotBusy(tx, clusterId);
      return {
        ...(resize ? { kind: CLUSTER_OPS.awsResize } : {}),
        params: { changed: parsed.changed, version: options.version },
        mark: { spec: parsed.spec },
      };
    },
  });
  return { cluster, operation, ignored };
}

export async function deleteCluster(k: Keelson, projectId: string, clusterId: string): Promise<WriteResult> {
  const onAws = (await getProviderType(k.db, projectId, clusterId)) === "aws";
  const { cluster, operation } = await startClusterTask(k, {
    projectId,
    clusterId,
    // An auto-deployed cluster's delete also tears down what its create made in the cloud.
    kind: onAws ? CLUSTER_OPS.awsDelete : CLUSTER_OPS.delete,
    mark: { status: "deleting", taskStatus: "deleting", lastOp: "delete" },
    first: (tx, current) => assertNotDeleting(tx, current),
  });
  return { cluster, operation, ignored: [] };
}
