import { createReadStream } from "node:fs";
import type { FastifyInstance } from "fastify";
import { type TSchema, Type } from "typebox";
import type { PackageShelf } from "../domain/packages/shelf.ts";
import { badRequest } from "../http/errors.ts";
import { ErrorBody, GLOBAL_ADMIN, PUBLIC } from "./common-schemas.ts";

/** A package is a few MiB; the limit only stops a runaway upload from filling memory. */
export const MAX_PACKAGE_BYTES = 256 * 1024 * 1024;

const StoredPackage = Type.Object({
  version: Type.String(),
  sha256: Type.String({ description: "sha256 of the .tar.gz, as agents verify it" }),
  sizeBytes: Type.Integer(),
  storedAt: Type.String({ description: "When it was stored (ISO 8601)" }),
});

export interface PackageRouteDocs {
  tags: string[];
  /** "agent package", "node package". */
  noun: string;
  /** Extra sentence for the upload description (what the package is checked for). */
  uploadNote: string;
  versionParam: TSchema;
}

/**
 * Upload, import, list and download of one shelf of packages (extension). Uploads and imports
 * are admin-only. Downloads are public on purpose: agents fetch them with a plain GET from the
 * URL they are given, a package holds no secret (the same open-source bundle on every host,
 * verified by the sha256 the agent receives over its signed-in link), and knowing a version
 * gives nothing an attacker could not build themselves.
 */
export async function registerPackageRoutes(
  app: FastifyInstance,
  shelf: () => PackageShelf,
  docs: PackageRouteDocs,
): Promise<void> {
  const { tags, noun } = docs;
  const base = shelf().kind.routeBase;
  const VersionParams = Type.Object({ version: docs.versionParam });

  // Scoped to the calling plugin: nowhere else does the API take raw bytes.
  for (const type of ["application/octet-stream", "application/gzip"]) {
    app.addContentTypeParser(type, { parseAs: "buffer", bodyLimit: MAX_PACKAGE_BYTES }, (_req, body, done) =>
      done(null, body),
    );
  }

  app.post(
    base,
    {
      config: GLOBAL_ADMIN,
      bodyLimit: MAX_PACKAGE_BYTES,
      schema: {
        tags,
        summary: `Upload a ${noun} (the .tar.gz of \`${shelf().kind.buildHint}\`) as application/octet-stream`,
        description:
          `The package is unpacked and verified like an agent would (manifest, every file's sha256) and stored in ` +
          `\`<data dir>/packages/${shelf().kind.dir}/\` with its \`.sha256\` (on PostgreSQL also in the database, ` +
          `which every replica serves from). ${docs.uploadNote} The same bytes again: ` +
          "200, nothing changes; other bytes under a stored version: 409. Admin token only.",
        response: { 200: StoredPackage, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody, 413: ErrorBody },
      },
    },
    async (request) => {
      if (!Buffer.isBuffer(request.body)) {
        throw badRequest("package", "send the package as the body with Content-Type: application/octet-stream");
      }
      return shelf().storeBytes(request.body);
    },
  );

  app.post(
    `${base}/import`,
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags,
        summary: `Import a ${noun} from a file on the control plane's host`,
        body: Type.Object(
          { path: Type.String({ minLength: 1, maxLength: 4096, description: "Absolute path of the .tar.gz" }) },
          { additionalProperties: false },
        ),
        response: { 200: StoredPackage, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (request) => shelf().importPath((request.body as { path: string }).path),
  );

  app.get(
    base,
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags,
        summary: `${noun[0]?.toUpperCase()}${noun.slice(1)}s stored on this control plane`,
        response: { 200: Type.Array(StoredPackage), 403: ErrorBody },
      },
    },
    async () => shelf().list(),
  );

  app.get(
    `${base}/:version/package.tar.gz`,
    {
      config: PUBLIC,
      schema: {
        tags,
        summary: `Download a stored ${noun} (public: agents fetch it with a plain GET)`,
        params: VersionParams,
        response: { 200: Type.Unknown({ description: "The .tar.gz (application/gzip)" }), 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const { file, pkg } = await shelf().file((request.params as { version: string }).version);
      return reply
        .header("content-type", "application/gzip")
        .header("content-length", pkg.sizeBytes)
        .header("cache-control", "public, max-age=31536000, immutable")
        .send(createReadStream(file));
    },
  );

  app.get(
    `${base}/:version/package.tar.gz.sha256`,
    {
      config: PUBLIC,
      schema: {
        tags,
        summary: "The package's sha256, in sha256sum format",
        params: VersionParams,
        response: { 200: Type.String(), 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const { pkg } = await shelf().file((request.params as { version: string }).version);
      return reply.type("text/plain").send(`${pkg.sha256}  package.tar.gz\n`);
    },
  );
}
