import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { providerRegions } from "../domain/cloud-providers/cloud-checks.ts";
import {
  createProvider,
  deleteProvider,
  findProviderAnywhere,
  listProviders,
  updateProvider,
  validateProviderInput,
} from "../domain/cloud-providers/cloud-providers.ts";
import { CREDENTIAL_RULES } from "../domain/cloud-providers/credentials.ts";
import { presentV3, presentV4 } from "../domain/cloud-providers/present.ts";
import { type ApiVersion, providerTypes } from "../domain/cloud-providers/provider-types.ts";
import { getProject } from "../domain/projects/projects.ts";
import { callerOf, canSeeProject } from "../http/auth.ts";
import { forbidden, notFound } from "../http/errors.ts";
import { sendNoBody } from "../http/no-body.ts";
import { errorResponses as errors, MEMBER, NoBody, ProjectUuidParams, READER } from "./common-schemas.ts";

const TAGS = ["cloud providers"];

const ProviderParams = Type.Object({
  project_uuid: Type.String({ description: "Project UUID" }),
  uuid: Type.String({ description: "Cloud provider account UUID" }),
});
const credentialRules = `Shapes per type: aws: ${CREDENTIAL_RULES.aws}. azure: ${CREDENTIAL_RULES.azure}. gcp: ${CREDENTIAL_RULES.gcp}.`;
const Key = Type.String({
  writeOnly: true,
  description: `Cloud access key; write-only, stored encrypted, never returned. ${credentialRules}`,
});
const Secret = Type.String({
  writeOnly: true,
  description: "Cloud secret key; write-only, stored encrypted, never returned.",
});
const Name = Type.String({ description: "Account name, unique in the project (1-255 characters)" });

const ProviderBody = (version: ApiVersion) =>
  Type.Object({
    name: Name,
    type: Type.String({
      description: `Provider type; ${version} creates ${providerTypes(version).slice(1).join(", ")}`,
    }),
    key: Key,
    secret: Secret,
  });

const UpdateBody = Type.Object({
  name: Type.Optional(Name),
  key: Type.Optional(Key),
  secret: Type.Optional(Secret),
});

const ProviderV4 = Type.Object({
  name: Type.String(),
  uuid: Type.String(),
  type: Type.String(),
  nodePoolUuid: Type.String({ description: "The account's node pool" }),
});
const ProviderV3 = Type.Object({
  name: Type.String(),
  uuid: Type.String(),
  type: Type.String(),
  nodePoolUuid: Type.String({ description: "The account's node pool" }),
  nodePoolName: Type.String(),
  projectID: Type.String({ description: "Project UUID" }),
});

const Regions = Type.Object({
  Regions: Type.Array(Type.Object({ RegionName: Type.String(), Endpoint: Type.String() })),
});
/**
 * Cloud provider accounts, v4 and v3 (spec §4.4, §4.7), plus the update that has no project in
 * its path (`PUT /v4/cloudProviders/{uuid}`, `PUT /v1/cloudProviders/{uuid}`).
 */
export const cloudProviderRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;

  for (const version of ["v4", "v3"] as const) {
    const base = `/${version}/:project_uuid`;
    const present = version === "v4" ? presentV4 : presentV3;

    app.get(
      `${base}/cloudProviders`,
      {
        config: READER,
        schema: {
          tags: TAGS,
          summary: `List cloud provider accounts (${version})`,
          params: ProjectUuidParams,
          response: { 200: Type.Array(version === "v4" ? ProviderV4 : ProviderV3), ...errors(403, 404) },
        },
      },
      async (request) => {
        await getProject(keelson.db, request.params.project_uuid);
        return (await listProviders(keelson.db, request.params.project_uuid)).map(present);
      },
    );

    app.post(
      `${base}/cloudProviders`,
      {
        config: MEMBER,
        schema: {
          tags: TAGS,
          summary: `Create a cloud provider account and its node pool (${version})`,
          description:
            "Answers 200 with the new account's uuid. 400 names the malformed field; 409 for a duplicate name " +
            "or for type local (the built-in local provider exists in every project). aws credentials are checked " +
            "with AWS first, as validate does (400 cloud_refused_credentials, 503 unreachable); nothing is stored on failure.",
          params: ProjectUuidParams,
          body: ProviderBody(version),
          response: { 200: Type.Object({ uuid: Type.String() }), ...errors(400, 403, 404, 409, 503) },
        },
      },
      async (request) => {
        await getProject(keelson.db, request.params.project_uuid);
        const created = await createProvider(keelson, request.params.project_uuid, version, request.body);
        return { uuid: created.id };
      },
    );

    app.get(
      `${base}/cloudProvider/types`,
      {
        config: READER,
        schema: {
          tags: TAGS,
          summary: `Provider types ${version} supports`,
          params: ProjectUuidParams,
          response: { 200: Type.Array(Type.Object({ type: Type.String() })), ...errors(403, 404) },
        },
      },
      async (request) => {
        await getProject(keelson.db, request.params.project_uuid);
        return providerTypes(version).map((type) => ({ type }));
      },
    );

    app.post(
      `${base}/cloudProviders/validate`,
      {
        config: MEMBER,
        schema: {
          tags: TAGS,
          summary: `Check a provider body before creating the account (${version})`,
          description:
            "Checks the name, the type and the shape of the credentials (400 names the field that is wrong), then " +
            "asks AWS whether it accepts aws credentials (STS GetCallerIdentity): 400 cloud_refused_credentials when " +
            "it refuses them, 503 when it cannot be reached or does not answer in time. Nothing is stored.",
          params: ProjectUuidParams,
          body: ProviderBody(version),
          response: { 200: NoBody, ...errors(400, 403, 404, 409, 503) },
        },
      },
      async (request, reply) => {
        await getProject(keelson.db, request.params.project_uuid);
        await validateProviderInput(keelson, version, request.body);
        return sendNoBody(reply);
      },
    );

    app.get(
      `${base}/cloudProviders/:uuid`,
      {
        config: READER,
        schema: {
          tags: TAGS,
          summary: `Regions of a public-cloud account (${version})`,
          description:
            "aws: the regions enabled for the account, from EC2 DescribeRegions (400 when AWS refuses the stored " +
            "credentials, 503 when it cannot be reached). The local provider has no regions (400).",
          params: ProviderParams,
          response: { 200: Regions, ...errors(400, 403, 404, 503) },
        },
      },
      async (request) => ({
        Regions: await providerRegions(keelson, request.params.project_uuid, request.params.uuid),
      }),
    );

    app.delete(
      `${base}/cloudProviders/:uuid`,
      {
        config: MEMBER,
        schema: {
          tags: TAGS,
          summary: `Delete a cloud provider account and its node pool (${version})`,
          description: "409 while clusters, nodes or external clusters use it, and for the built-in local provider.",
          params: ProviderParams,
          response: { 200: NoBody, ...errors(403, 404, 409) },
        },
      },
      async (request, reply) => {
        await deleteProvider(keelson.db, request.params.project_uuid, request.params.uuid);
        return sendNoBody(reply);
      },
    );
  }

  // The update carries no project in its path, so the auth hook cannot check one: the provider's
  // own project is checked here. An id that exists nowhere is a 404 for every caller; one that
  // exists in a project the caller cannot see is a 403, as any other call into that project.
  for (const version of ["v4", "v1"] as const) {
    app.put(
      `/${version}/cloudProviders/:uuid`,
      {
        config: MEMBER,
        schema: {
          tags: TAGS,
          summary: `Rename or re-key a cloud provider account (${version})`,
          description:
            "Only the fields given change; key and secret are checked against the account's type, and a new aws " +
            "key or secret with AWS (together with the stored other half) before anything changes: 400 " +
            "cloud_refused_credentials, 503 unreachable. 409 for a duplicate name and for the built-in local provider.",
          params: Type.Object({ uuid: Type.String({ description: "Cloud provider account UUID" }) }),
          body: UpdateBody,
          response: { 200: NoBody, ...errors(400, 403, 404, 409, 503) },
        },
      },
      async (request, reply) => {
        const identity = callerOf(request);
        const provider = await findProviderAnywhere(keelson.db, request.params.uuid);
        if (!provider) throw notFound("cloud provider", request.params.uuid);
        if (!canSeeProject(identity, provider.projectId)) {
          throw forbidden("the token does not grant access to this cloud provider's project");
        }
        await updateProvider(keelson, provider.projectId, provider.id, request.body);
        return sendNoBody(reply);
      },
    );
  }
};
