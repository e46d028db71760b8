import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import {
  endSession,
  findSession,
  KEYSTONE_DOMAIN,
  type KeystoneAuthRequest,
  loginSubject,
  type Session,
  throttledLogin,
} from "../domain/identity/keystone.ts";
import { LoginThrottle } from "../domain/identity/login-throttle.ts";
import { roleIncludes } from "../domain/identity/roles.ts";
import { callerOf, canSeeProject } from "../http/auth.ts";
import { ApiError, forbidden } from "../http/errors.ts";
import { ErrorBody, IDENTITY_TAGS, PUBLIC, READER } from "./common-schemas.ts";

/**
 * Keystone v3 token API, the part existing clients use to log in: `POST` issues a
 * project-scoped session token (X-Subject-Token), `GET`/`HEAD` validate one, `DELETE` revokes one.
 * Also reachable as /qbert/keystone/... through the compat prefix rewrite.
 */

const Domain = Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) });

const AuthRequest = Type.Object(
  {
    auth: Type.Object({
      identity: Type.Object({
        methods: Type.Array(Type.String(), { minItems: 1, description: 'Must include "password"' }),
        password: Type.Optional(
          Type.Object({
            user: Type.Object({
              name: Type.Optional(Type.String({ description: "User name (or give `id`)" })),
              id: Type.Optional(Type.String()),
              password: Type.String({ writeOnly: true }),
              domain: Type.Optional(Domain),
            }),
          }),
        ),
      }),
      scope: Type.Optional(
        Type.Object({
          project: Type.Optional(
            Type.Object({
              name: Type.Optional(Type.String({ description: "Project name (or give `id`)" })),
              id: Type.Optional(Type.String()),
              domain: Type.Optional(Domain),
            }),
          ),
        }),
      ),
    }),
  },
  {
    description: "Keelson has one identity domain: any domain id or name is accepted (clients usually send `default`).",
  },
);

const NamedInDomain = Type.Object({
  id: Type.String(),
  name: Type.String(),
  domain: Type.Object({ id: Type.String(), name: Type.String() }),
});
const TokenBody = Type.Object({
  token: Type.Object({
    methods: Type.Array(Type.String()),
    expires_at: Type.String(),
    issued_at: Type.String(),
    audit_ids: Type.Array(Type.String()),
    user: NamedInDomain,
    project: NamedInDomain,
    roles: Type.Array(Type.Object({ id: Type.String(), name: Type.String() })),
    catalog: Type.Array(Type.Unknown()),
  }),
});

const SubjectHeaders = Type.Object({
  "x-subject-token": Type.String({ minLength: 1, description: "The token to validate or revoke" }),
});

/** Keystone writes timestamps with microseconds (`...:58.000000Z`); clients parse either, but match it. */
function keystoneTime(iso: string): string {
  return iso.replace(/\.(\d{3})Z$/, ".$1000Z");
}

function present(session: Session) {
  const domain = { ...KEYSTONE_DOMAIN };
  return {
    token: {
      methods: ["password"],
      expires_at: keystoneTime(session.expiresAt),
      issued_at: keystoneTime(session.issuedAt),
      // Keystone's audit id identifies a token without revealing it; the token row id serves.
      audit_ids: [session.tokenId],
      user: { ...session.user, domain },
      project: { ...session.project, domain },
      // The user's one project role (admin, member or reader).
      roles: [{ id: session.role, name: session.role }],
      catalog: [],
    },
  };
}

const tokenNotFound = () => new ApiError(404, "not_found", "the subject token is not valid");

/** The caller may see a session of its own project (the admin any); otherwise it does not exist for them. */
async function subjectSession(request: FastifyRequest, subjectToken: string): Promise<Session> {
  const session = await findSession(request.server.keelson.db, subjectToken);
  if (!session || !canSeeProject(callerOf(request), session.project.id)) throw tokenNotFound();
  return session;
}

function withSubject(reply: FastifyReply, token: string): FastifyReply {
  return reply.header("x-subject-token", token);
}

export const keystoneRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;
  const ttlHours = app.keelson.settings.sessionTtlHours;
  const throttle = new LoginThrottle(db);

  app.post(
    "/keystone/v3/auth/tokens",
    {
      config: {
        ...PUBLIC,
        issues: "session token",
        auditTarget: (request) => loginSubject(request.body as KeystoneAuthRequest),
      },
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Log in with a password (Keystone v3 style)",
        description:
          "Answers 201 with the new token in the `X-Subject-Token` header; use it as `X-Auth-Token`. " +
          `Tokens expire after KEELSON_SESSION_TTL_HOURS (default 24) hours. ` +
          "Unknown project, unknown user and wrong password all answer the same 401. After 10 failed logins of " +
          "one user (or 100 of any) from one address within 5 minutes, that address gets 429 with Retry-After " +
          "until the 5 minutes are over.",
        security: [],
        querystring: Type.Object({
          nocatalog: Type.Optional(Type.String({ description: "Accepted for compatibility; the catalog is empty" })),
        }),
        body: AuthRequest,
        response: { 201: TokenBody, ...Object.fromEntries([400, 401, 429].map((c) => [c, ErrorBody])) },
      },
    },
    async (request, reply) => {
      const { token, session } = await throttledLogin(db, throttle, request.ip, request.body, ttlHours);
      return withSubject(reply, token).status(201).send(present(session));
    },
  );

  app.get(
    "/keystone/v3/auth/tokens",
    {
      config: READER,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Validate a login token (Keystone v3 style)",
        description: "X-Auth-Token authenticates the caller; X-Subject-Token is the session token to describe.",
        headers: SubjectHeaders,
        response: { 200: TokenBody, ...Object.fromEntries([400, 403, 404].map((c) => [c, ErrorBody])) },
      },
    },
    async (request, reply) => {
      const session = await subjectSession(request, request.headers["x-subject-token"]);
      return withSubject(reply, request.headers["x-subject-token"]).send(present(session));
    },
  );

  app.delete(
    "/keystone/v3/auth/tokens",
    {
      config: READER,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Revoke a login token (Keystone v3 style)",
        description: "A session may end itself; ending another session of the project needs the project `admin` role.",
        headers: SubjectHeaders,
        response: {
          204: Type.Unsafe<undefined>({ description: "No body" }),
          ...Object.fromEntries([400, 403, 404].map((c) => [c, ErrorBody])),
        },
      },
    },
    async (request, reply) => {
      const session = await subjectSession(request, request.headers["x-subject-token"]);
      const caller = callerOf(request);
      if (caller.kind === "project" && caller.tokenId !== session.tokenId && !roleIncludes(caller.role, "admin")) {
        throw forbidden("ending another user's session needs the admin role in the project");
      }
      await endSession(db, session.tokenId);
      return reply.status(204).send();
    },
  );
};
