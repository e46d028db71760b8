import { createReadStream } from "node:fs";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { ImagesListResult, ImagesStagePayload, ImagesStageResult } from "@keelson/protocol";
import { Type } from "typebox";
import { listHostImages, stageHostImages } from "../domain/hosts/host-images.ts";
import { IMAGE_ARCHIVE_ROUTE, ImageArchiveStore } from "../domain/packages/image-archives.ts";
import { callerOf } from "../http/auth.ts";
import { badRequest } from "../http/errors.ts";
import { AGENT_RELAY_ERRORS, ErrorBody, GLOBAL_ADMIN, HostParams, PUBLIC } from "./common-schemas.ts";
import { MAX_PACKAGE_BYTES } from "./package-routes.ts";

/** Image archives are a role version's images: larger than a package. */
const MAX_ARCHIVE_BYTES = 4 * MAX_PACKAGE_BYTES;

const StoredImageArchive = Type.Object({
  sha256: Type.String(),
  sizeBytes: Type.Integer(),
  images: Type.Array(Type.String(), {
    description: "The image names the archive carries, as `ctr images ls` lists them",
  }),
});
const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$" });

/**
 * Image archives (the operator's `dockerRepo`, spec §4.9 step 4) and their staging on hosts.
 * Uploads and staging are the admin's; the download is public like a package's (agents fetch it
 * with a plain GET and check the sha256 their signed-in link gave them).
 */
export const imageArchiveRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const store = new ImageArchiveStore(k);
  const tags = ["image archives"];
  app.addContentTypeParser(
    ["application/octet-stream", "application/x-tar"],
    { parseAs: "buffer", bodyLimit: MAX_ARCHIVE_BYTES },
    (_req, body, done) => done(null, body),
  );

  app.post(
    IMAGE_ARCHIVE_ROUTE,
    {
      config: GLOBAL_ADMIN,
      bodyLimit: MAX_ARCHIVE_BYTES,
      schema: {
        tags,
        summary: "Upload an OCI or docker image archive (.tar, application/octet-stream); stored by its sha256",
        response: { 200: StoredImageArchive, 400: ErrorBody, 403: ErrorBody, 413: ErrorBody },
      },
    },
    async (request) => {
      if (!Buffer.isBuffer(request.body)) {
        throw badRequest("archive", "send the archive as the body with Content-Type: application/octet-stream");
      }
      return store.storeBytes(request.body);
    },
  );

  app.get(
    `${IMAGE_ARCHIVE_ROUTE}/:sha256/archive.tar`,
    {
      config: PUBLIC,
      schema: {
        tags,
        summary: "Download a stored image archive (public: agents fetch it with a plain GET)",
        params: Type.Object({ sha256: Sha256 }),
        response: { 200: Type.Unknown({ description: "The archive (application/x-tar)" }), 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const { file, archive } = await store.get(request.params.sha256);
      return reply
        .header("content-type", "application/x-tar")
        .header("content-length", archive.sizeBytes)
        .send(createReadStream(file));
    },
  );

  app.post(
    "/v1/hosts/:uuid/images",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags,
        summary: "Stage a stored image archive on the host and import it into its runtime when one runs",
        description:
          "The agent downloads the archive, checks its sha256, keeps it as `<name>.tar` among the host's user images " +
          "(imported on every start of its runtime) and, when its runtime runs, imports it now with " +
          "`ctr -n k8s.io images import` and checks every image of the archive is listed. `imported` is false on a " +
          "host with no runtime. 409 when the agent is offline or too old.",
        params: HostParams,
        body: Type.Object(
          { name: ImagesStagePayload.properties.name, sha256: Sha256 },
          { additionalProperties: false },
        ),
        response: { 200: ImagesStageResult, ...AGENT_RELAY_ERRORS },
      },
    },
    async (request) => stageHostImages(k, callerOf(request), request.params.uuid, request.body),
  );

  app.get(
    "/v1/hosts/:uuid/images",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags,
        summary: "The images the host's container runtime lists now (`ctr -n k8s.io images ls -q`, asked of its agent)",
        params: HostParams,
        response: { 200: ImagesListResult, ...AGENT_RELAY_ERRORS },
      },
    },
    async (request) => listHostImages(k, callerOf(request), request.params.uuid),
  );
};
