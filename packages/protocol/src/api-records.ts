import { type Static, Type } from "typebox";

/**
 * Records of the API that the console reads too: declared once here, for the control plane's
 * response schemas and presenters and for the console's types, so they cannot drift apart.
 * The console imports this file by its own path (`@keelson/protocol/api-records`), which needs
 * nothing of Node.
 *
 * The node records: spec §2.2, v4 and v3 sets, plus Keelson's agentConnected and lastSeen.
 */

const NullableString = (description: string) => Type.Union([Type.String(), Type.Null()], { description });

const v4Fields = {
  uuid: Type.String({ description: "Node UUID (the host id)" }),
  name: Type.String({ description: "Host name" }),
  primaryIp: Type.String({ description: "Node IP address" }),
  status: Type.String({ description: "ok, converging or failed: the state of the Kubernetes setup on the host" }),
  isMaster: Type.Integer({ description: "1 when the node is a master" }),
  api_responding: Type.Integer({ description: "1 when the API server on the node runs (masters only)" }),
  clusterName: NullableString("Cluster the node belongs to; null when unattached"),
  clusterUuid: NullableString("Cluster the node belongs to; null when unattached"),
  cloudProviderType: Type.String({ description: "Provider type, local for registered hosts" }),
  nodePoolName: Type.String(),
  nodePoolUuid: Type.String(),
  projectId: Type.String({ description: "Project UUID" }),
  agentConnected: Type.Boolean({
    description: "Keelson: true while the host's agent holds its link to the control plane",
  }),
  lastSeen: NullableString("Keelson: when the agent was last heard from (ISO 8601); null if never"),
};

export const NodeV4 = Type.Object(v4Fields, { description: "Node record (v4 set of spec §2.2)" });

export const NodeV3 = Type.Object(
  {
    ...v4Fields,
    actualKubeRoleVersion: Type.String({ description: "The node's kube version" }),
    cloudInstanceId: Type.String(),
    cloudProviderUuid: Type.String(),
    clusterKubeRoleVersion: NullableString("The cluster's kube version; null when unattached"),
    startKube: Type.Integer({ description: "1 when Kubernetes is started on the node" }),
    masterless: Type.Integer(),
  },
  { description: "Node record (v3 set of spec §2.2)" },
);

export type NodeRecordV4 = Static<typeof NodeV4>;
export type NodeRecordV3 = Static<typeof NodeV3>;

/**
 * `batch` of an `operation.step` event (README "Live progress"): one batch of a rollout step, a
 * master alone or workers together, announced when it starts and when it is done.
 */
export interface StepBatch {
  /** 1-based, of the `of` batches this run of the step takes (a resumed step counts what is left). */
  number: number;
  of: number;
  nodes: { id: string; name: string }[];
  state: "started" | "done";
}
