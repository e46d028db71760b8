import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { issueKubeconfig } from "../domain/kubeconfig/kubeconfig.ts";
import { subjectOf } from "../domain/kubeconfig/subject.ts";
import { issueWebCliSession } from "../domain/webcli/webcli.ts";
import { callerOf } from "../http/auth.ts";
import { ErrorBody, MEMBER } from "./common-schemas.ts";

const KubeconfigParams = Type.Object({
  project_uuid: Type.String({ minLength: 1, description: "Project UUID" }),
  cluster_uuid: Type.String({ minLength: 1, description: "Cluster UUID" }),
});

const KubeconfigQuery = Type.Object({
  force_cert_auth: Type.Boolean({
    default: false,
    description: "true: authenticate with a client certificate signed by the cluster CA instead of a bearer token",
  }),
});

const WebCliParams = Type.Object({
  project_uuid: Type.String({ minLength: 1, description: "Project UUID" }),
  uuid: Type.String({ minLength: 1, description: "Cluster UUID" }),
});

const WebCliToken = Type.Object(
  {
    token: Type.String({
      description: "Web CLI session token: valid 10 minutes, for this project and cluster only; not an X-Auth-Token",
    }),
  },
  { description: "A web CLI session token" },
);

/** A download name that survives any cluster name: ASCII fallback plus the RFC 6266 UTF-8 form. */
function attachment(fileName: string): string {
  const ascii = fileName.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`;
}

export const kubeconfigRoutes: FastifyPluginAsyncTypebox = async (app) => {
  for (const version of ["v4", "v3"] as const) {
    app.get(
      `/${version}/:project_uuid/kubeconfig/:cluster_uuid`,
      {
        config: { ...MEMBER, issues: "kubeconfig" },
        schema: {
          tags: ["kubeconfig"],
          summary: "Download a kubeconfig for a cluster",
          description:
            "A kubeconfig YAML with the cluster CA, the API server URL (externalDnsName, else masterVipIpv4, " +
            "else the first master's IP, with k8sApiPort) and a fresh credential for the caller: a bearer " +
            "token, or with force_cert_auth=true a client certificate (group keelson:cluster-admins). " +
            "Either expires after the cluster's certExpiryHrs. 409 while the cluster has no API endpoint.",
          params: KubeconfigParams,
          querystring: KubeconfigQuery,
          response: {
            200: {
              description: "kubeconfig YAML",
              content: { "application/octet-stream": { schema: Type.String({ format: "binary" }) } },
            },
            400: ErrorBody,
            403: ErrorBody,
            404: ErrorBody,
            409: ErrorBody,
          },
        },
      },
      async (request, reply) => {
        const issued = await issueKubeconfig(app.keelson, {
          projectId: request.params.project_uuid,
          clusterId: request.params.cluster_uuid,
          subject: subjectOf(callerOf(request)),
          forceCertAuth: request.query.force_cert_auth,
        });
        return reply
          .header("content-type", "application/octet-stream")
          .header("content-disposition", attachment(`${issued.clusterName}.yaml`))
          .header("cache-control", "no-store")
          .send(issued.yaml);
      },
    );

    app.post(
      `/${version}/:project_uuid/webcli/:uuid`,
      {
        config: { ...MEMBER, issues: "web CLI token" },
        schema: {
          tags: ["kubeconfig"],
          summary: "Issue a web CLI session token for a cluster",
          params: WebCliParams,
          response: { 200: WebCliToken, 400: ErrorBody, 403: ErrorBody, 404: ErrorBody },
        },
      },
      async (request, reply) => {
        const session = await issueWebCliSession(app.keelson, {
          projectId: request.params.project_uuid,
          clusterId: request.params.uuid,
          identity: callerOf(request),
        });
        return reply.header("cache-control", "no-store").send(session);
      },
    );
  }
};
