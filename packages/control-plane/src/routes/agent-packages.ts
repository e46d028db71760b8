import { createReadStream } from "node:fs";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AGENT_VERSION_PATTERN } from "@keelson/protocol";
import { Type } from "typebox";
import { importPackagePath, listPackages, packageFile, storePackageBytes } from "../domain/agent-packages/store.ts";
import { badRequest } from "../http/errors.ts";
import { ErrorBody } from "./common-schemas.ts";

/** A package is a few MiB; the limit only stops a runaway upload from filling memory. */
export const MAX_PACKAGE_BYTES = 256 * 1024 * 1024;

const StoredPackage = Type.Object({
  version: Type.String(),
  sha256: Type.String({ description: "sha256 of the .tar.gz, as agents verify it" }),
  sizeBytes: Type.Integer(),
  storedAt: Type.String({ description: "When it was stored (ISO 8601)" }),
});
const VersionParams = Type.Object({ version: Type.String({ pattern: AGENT_VERSION_PATTERN }) });

/**
 * Agent packages stored in the control plane's data dir and served to agents (extension;
 * docs/agent-package.md). Uploads and imports are admin-only. Downloads are public on purpose:
 * agents fetch them with a plain GET from the URL they are given, a package holds no secret
 * (it is the same open-source bundle on every host, verified by sha256 from the signed-in
 * link), and knowing a version gives nothing an attacker could not build themselves.
 */
export const agentPackageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const tags = ["agent packages"];

  // Scoped to this plugin: nowhere else does the API take raw bytes.
  for (const type of ["application/octet-stream", "application/gzip"]) {
    app.addContentTypeParser(type, { parseAs: "buffer", bodyLimit: MAX_PACKAGE_BYTES }, (_req, body, done) =>
      done(null, body),
    );
  }

  app.post(
    "/v1/agentPackages",
    {
      config: { auth: "admin" },
      bodyLimit: MAX_PACKAGE_BYTES,
      schema: {
        tags,
        summary: "Upload an agent package (the .tar.gz of `pnpm pack:agent`) as application/octet-stream",
        description:
          "The package is unpacked and verified like an agent would (manifest, every file's sha256) and stored as " +
          "`<data dir>/packages/agent/keelson-agent-<version>.tar.gz` with its `.sha256`. The same bytes again: 200, " +
          "nothing changes; other bytes under a stored version: 409. Admin token only.",
        response: { 200: StoredPackage, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody, 413: ErrorBody },
      },
    },
    async (request) => {
      if (!Buffer.isBuffer(request.body)) {
        throw badRequest("package", "send the package as the body with Content-Type: application/octet-stream");
      }
      return storePackageBytes(k.dataDir, request.body);
    },
  );

  app.post(
    "/v1/agentPackages/import",
    {
      config: { auth: "admin" },
      schema: {
        tags,
        summary: "Import an agent package from a file on the control plane's host",
        body: Type.Object(
          { path: Type.String({ minLength: 1, maxLength: 4096, description: "Absolute path of the .tar.gz" }) },
          { additionalProperties: false },
        ),
        response: { 200: StoredPackage, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (request) => importPackagePath(k.dataDir, request.body.path),
  );

  app.get(
    "/v1/agentPackages",
    {
      config: { auth: "admin" },
      schema: {
        tags,
        summary: "Agent packages stored on this control plane",
        response: { 200: Type.Array(StoredPackage), 403: ErrorBody },
      },
    },
    async () => listPackages(k.dataDir),
  );

  app.get(
    "/v1/agentPackages/:version/package.tar.gz",
    {
      config: { auth: "public" },
      schema: {
        tags,
        summary: "Download a stored agent package (public: agents fetch it with a plain GET)",
        params: VersionParams,
        response: { 200: Type.Unknown({ description: "The .tar.gz (application/gzip)" }), 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const { file, pkg } = await packageFile(k.dataDir, request.params.version);
      return reply
        .header("content-type", "application/gzip")
        .header("content-length", pkg.sizeBytes)
        .header("cache-control", "public, max-age=31536000, immutable")
        .send(createReadStream(file));
    },
  );

  app.get(
    "/v1/agentPackages/:version/package.tar.gz.sha256",
    {
      config: { auth: "public" },
      schema: {
        tags,
        summary: "The package's sha256, in sha256sum format",
        params: VersionParams,
        response: { 200: Type.String(), 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const { pkg } = await packageFile(k.dataDir, request.params.version);
      return reply.type("text/plain").send(`${pkg.sha256}  package.tar.gz\n`);
    },
  );
};
