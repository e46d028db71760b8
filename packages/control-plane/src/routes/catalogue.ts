import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { removeAddons } from "../domain/addons/remove-addons.ts";
import {
  addonVersionsOf,
  supportedAddonOperatorTags,
  supportedAddonVersionsOf,
} from "../domain/catalogue/addon-versions.ts";
import { supportedRoleVersions } from "../domain/catalogue/role-versions.ts";
import { findCluster } from "../domain/clusters/views.ts";
import { getProject } from "../domain/projects/projects.ts";
import { sendNoBody } from "../http/no-body.ts";
import { errorResponses, MEMBER, NoBody, READER } from "./common-schemas.ts";

const TAGS = ["role versions and add-ons"];

const errors = errorResponses;

const ProjectParams = Type.Object({ projectId: Type.String({ description: "Project UUID" }) });
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
      config: READER,
      schema: {
        tags: TAGS,
        summary: "Supported kube role versions, oldest first",
        params: ProjectParams,
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

  app.get(
    "/v4/:projectId/clusters/:clusterId/addonversions",
    {
      config: READER,
      schema: {
        tags: TAGS,
        summary: "Add-on versions of the cluster's kube role version",
        params: ClusterParams,
        response: { 200: AddonVersions, ...errors(403, 404, 409) },
      },
    },
    async (request) => {
      const cluster = await findCluster(keelson.db, request.params.projectId, request.params.clusterId);
      return addonVersionsOf(keelson.catalogue, cluster.kubeRoleVersion);
    },
  );

  app.route({
    config: READER,
    // The spec says DELETE; existing clients (the Terraform provider among them) send GET. Both read.
    method: ["DELETE", "GET"],
    url: "/v4/:projectId/clusters/:clusterId/suppotedaddonversions",
    schema: {
      tags: TAGS,
      summary: "Supported add-on versions of the cluster (path spelled as the interface spells it)",
      description:
        "Per add-on, every version shipped with a role version the cluster runs or can upgrade to " +
        "(newer builds of its minor and the next minor), oldest first. A DELETE that changes nothing.",
      params: ClusterParams,
      response: {
        200: Type.Record(Type.String(), Type.Array(Type.String()), { description: "Add-on name -> versions" }),
        ...errors(403, 404, 409),
      },
    },
    handler: async (request) => {
      const cluster = await findCluster(keelson.db, request.params.projectId, request.params.clusterId);
      return supportedAddonVersionsOf(keelson.catalogue, cluster.kubeRoleVersion);
    },
  });

  app.route({
    config: READER,
    // The spec says DELETE; existing clients (the Terraform provider among them) send GET. Both read.
    method: ["DELETE", "GET"],
    url: "/v4/:projectId/clusters/:clusterId/supportedaddonoperatorversions",
    schema: {
      tags: TAGS,
      summary: "Supported add-on operator image tags, oldest first",
      description: "A DELETE that changes nothing, as the interface defines it.",
      params: ClusterParams,
      response: { 200: Type.Array(Type.String()), ...errors(403, 404) },
    },
    handler: async (request) => {
      await findCluster(keelson.db, request.params.projectId, request.params.clusterId);
      return supportedAddonOperatorTags(keelson.catalogue);
    },
  });

  app.delete(
    "/v4/:projectId/clusters/:clusterId/addons",
    {
      config: MEMBER,
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
