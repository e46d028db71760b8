import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type TSchema, Type } from "typebox";
import { removeAddons } from "../domain/addons/remove-addons.ts";
import {
  addonVersionsOf,
  supportedAddonOperatorTags,
  supportedAddonVersionsOf,
} from "../domain/catalogue/addon-versions.ts";
import { supportedRoleVersions } from "../domain/catalogue/role-versions.ts";
import { type ClusterRow, findCluster } from "../domain/clusters/views.ts";
import { getProject } from "../domain/projects/projects.ts";
import { sendNoBody } from "../http/no-body.ts";
import { errorResponses as errors, NoBody, ProjectIdParams } from "./common-schemas.ts";

const TAGS = ["role versions and add-ons"];

const ClusterParams = Type.Object({
  projectId: Type.String({ description: "Project UUID" }),
  clusterId: Type.String({ description: "Cluster UUID" }),
});

const AddonVersions = Type.Record(Type.String(), Type.String(), {
  description: "Add-on name -> version",
});

const Role = Type.Object({
  uuid: Type.String({ description: "Stable id of the role version" }),
  k8sMajorVersion: Type.Integer(),
  k8sMinorVersion: Type.Integer(),
  k8sPatchVersion: Type.Integer(),
  patchVersion: Type.Integer({
    description: "Build number of Keelson's node package for this Kubernetes patch: the N of -kls.N",
  }),
  roleVersion: Type.String({ description: "For example 1.31.4-kls.1" }),
  addonsDetails: AddonVersions,
  metadata: Type.Object({
    containerRuntime: Type.String(),
    etcdVersion: Type.String(),
    nodePackage: Type.Object({ name: Type.String(), version: Type.String(), file: Type.String() }),
  }),
});

/**
 * The catalogue endpoints and add-on removal (spec §4.1), with the spec's paths and methods as
 * they are, including the spelling `suppotedaddonversions` and the DELETEs that return data.
 *
 * Authentication: §7 leaves GET addonversions, GET supportedRoleVersions and GET discover out of
 * its 403 row. Keelson still asks for a token of the project on them: addonversions reads a
 * cluster of the project, and every existing client sends its token on every call anyway.
 */
export const catalogueRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;

  app.get(
    "/v4/:projectId/clusters/supportedRoleVersions",
    {
      schema: {
        tags: TAGS,
        summary: "Supported kube role versions, oldest first",
        params: ProjectIdParams,
        response: {
          200: Type.Object({ count: Type.Integer(), roles: Type.Array(Role) }),
          ...errors(403, 404),
        },
      },
    },
    async (request) => {
      await getProject(keelson.db, request.params.projectId);
      return supportedRoleVersions(keelson.catalogue);
    },
  );

  /** A catalogue answer about one cluster of the project (404 when the project has no such cluster). */
  const clusterRead = (
    method: "GET" | ("DELETE" | "GET")[],
    url: string,
    doc: { summary: string; description?: string; answer: TSchema; errorCodes: number[] },
    answer: (cluster: ClusterRow) => unknown,
  ) =>
    app.route({
      method,
      url,
      schema: {
        tags: TAGS,
        summary: doc.summary,
        ...(doc.description ? { description: doc.description } : {}),
        params: ClusterParams,
        response: { 200: doc.answer, ...errors(...doc.errorCodes) },
      },
      handler: async (request) =>
        answer(await findCluster(keelson.db, request.params.projectId, request.params.clusterId)),
    });
  // The spec says DELETE for the two reads below; existing clients (the Terraform provider
  // among them) send GET. Both read.
  const DELETE_OR_GET: ("DELETE" | "GET")[] = ["DELETE", "GET"];

  clusterRead(
    "GET",
    "/v4/:projectId/clusters/:clusterId/addonversions",
    {
      summary: "Add-on versions of the cluster's kube role version",
      answer: AddonVersions,
      errorCodes: [403, 404, 409],
    },
    (cluster) => addonVersionsOf(keelson.catalogue, cluster.kubeRoleVersion),
  );

  clusterRead(
    DELETE_OR_GET,
    "/v4/:projectId/clusters/:clusterId/suppotedaddonversions",
    {
      summary: "Supported add-on versions of the cluster (path spelled as the interface spells it)",
      description:
        "Per add-on, every version shipped with a role version the cluster runs or can upgrade to " +
        "(newer builds of its minor and the next minor), oldest first. A DELETE that changes nothing.",
      answer: Type.Record(Type.String(), Type.Array(Type.String()), { description: "Add-on name -> versions" }),
      errorCodes: [403, 404, 409],
    },
    (cluster) => supportedAddonVersionsOf(keelson.catalogue, cluster.kubeRoleVersion),
  );

  clusterRead(
    DELETE_OR_GET,
    "/v4/:projectId/clusters/:clusterId/supportedaddonoperatorversions",
    {
      summary: "Supported add-on operator image tags, oldest first",
      description: "A DELETE that changes nothing, as the interface defines it.",
      answer: Type.Array(Type.String()),
      errorCodes: [403, 404],
    },
    () => supportedAddonOperatorTags(keelson.catalogue),
  );

  app.delete(
    "/v4/:projectId/clusters/:clusterId/addons",
    {
      schema: {
        tags: TAGS,
        summary: "Remove every add-on of the cluster",
        description:
          "Recorded as an addons.remove operation (see GET /v4/{projectId}/operations) and answered at once. " +
          "409 while the cluster is being deleted.",
        params: ClusterParams,
        response: { 200: NoBody, ...errors(403, 404, 409) },
      },
    },
    async (request, reply) => {
      await removeAddons(keelson, request.params.projectId, request.params.clusterId);
      return sendNoBody(reply);
    },
  );
};
