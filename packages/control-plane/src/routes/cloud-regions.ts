import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { providerRegionDetail, uploadSshKey } from "../domain/cloud-providers/cloud-checks.ts";
import { SSH_KEY_TYPES } from "../domain/cloud-providers/ssh-public-key.ts";
import { sendNoBody } from "../http/no-body.ts";
import { errorResponses as errors, MEMBER, NoBody, READER } from "./common-schemas.ts";

const TAGS = ["cloud providers"];

const RegionParams = Type.Object({
  project_uuid: Type.String({ description: "Project UUID" }),
  uuid: Type.String({ description: "Cloud provider account UUID" }),
  regionid: Type.String({ description: "Region name, as listed by the provider detail (RegionName)" }),
});

const RegionDetail = Type.Object({
  azs: Type.Array(Type.Object({ name: Type.String(), zoneId: Type.String(), state: Type.String() }), {
    description: "Availability zones (EC2 DescribeAvailabilityZones)",
  }),
  domains: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), private: Type.Boolean() }), {
    description: "The account's Route 53 hosted zones",
  }),
  flavors: Type.Array(
    Type.Object({
      name: Type.String(),
      vcpus: Type.Integer(),
      memoryMiB: Type.Integer(),
      architectures: Type.Array(Type.String()),
    }),
    { description: "Instance types offered in the region" },
  ),
  keyPairs: Type.Array(Type.Object({ name: Type.String(), fingerprint: Type.String(), type: Type.String() }), {
    description: "The account's key pairs in the region",
  }),
  operatingSystems: Type.Array(
    Type.Object({
      os: Type.String(),
      architecture: Type.String(),
      imageId: Type.String(),
      imageName: Type.String(),
      created: Type.String(),
    }),
    { description: "The newest image of each OS Keelson supports (Ubuntu 24.04 and 22.04, Debian 12) in the region" },
  ),
  vpcs: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      cidrBlock: Type.String(),
      isDefault: Type.Boolean(),
      subnets: Type.Array(
        Type.Object({ id: Type.String(), cidrBlock: Type.String(), az: Type.String(), public: Type.Boolean() }),
      ),
    }),
    { description: "VPCs with their subnets" },
  ),
});

const SshKeyBody = Type.Object({
  name: Type.String({ description: "Name of the key pair in the region (1-255 printable ASCII characters)" }),
  key: Type.String({ description: `OpenSSH public key, one line: ${SSH_KEY_TYPES.join(", ")}` }),
});

const CLOUD_ERRORS =
  "400 cloud_refused_credentials when AWS refuses the account's stored credentials; " +
  "503 cloud_unreachable or cloud_unavailable when AWS cannot be reached, does not answer in time " +
  "(KEELSON_CLOUD_CALL_TIMEOUT_MS) or fails. Azure and gcp accounts: 400 unsupported_provider.";

/** Region detail and SSH key upload of a cloud account, v4 and v3 (spec §4.4, §4.7), on the cloud's API. */
export const cloudRegionRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;

  for (const version of ["v4", "v3"] as const) {
    const base = `/${version}/:project_uuid/cloudProviders/:uuid/region/:regionid`;

    app.get(
      base,
      {
        config: READER,
        schema: {
          tags: TAGS,
          summary: `Region detail: availability zones, domains, flavors, key pairs, images, VPCs (${version})`,
          description: `Read from the cloud at each call; 404 for a region the account does not have. ${CLOUD_ERRORS}`,
          params: RegionParams,
          response: { 200: RegionDetail, ...errors(400, 403, 404, 503) },
        },
      },
      async (request) => {
        const { project_uuid, uuid, regionid } = request.params;
        return providerRegionDetail(keelson, project_uuid, uuid, regionid);
      },
    );

    app.post(
      `${base}/sshKey`,
      {
        config: MEMBER,
        schema: {
          tags: TAGS,
          summary: `Import an SSH public key into a region as a key pair (${version})`,
          description:
            "400 when the key is not a valid OpenSSH public key (checked before the cloud is asked); 409 when the " +
            `region already has a key pair of that name. ${CLOUD_ERRORS}`,
          params: RegionParams,
          body: SshKeyBody,
          response: { 200: NoBody, ...errors(400, 403, 404, 409, 503) },
        },
      },
      async (request, reply) => {
        const { project_uuid, uuid, regionid } = request.params;
        await uploadSshKey(keelson, project_uuid, uuid, regionid, request.body);
        return sendNoBody(reply);
      },
    );
  }
};
