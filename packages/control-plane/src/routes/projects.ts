import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  createProject,
  getProject,
  PROJECT_NAME_PATTERN,
  type ProjectRow,
  projectsVisibleTo,
} from "../domain/projects/projects.ts";
import { callerOf } from "../http/auth.ts";
import {
  errorResponses as errors,
  GLOBAL_ADMIN,
  IDENTITY_TAGS,
  READER,
  Timestamp,
  V1ProjectParams,
} from "./common-schemas.ts";

/** Projects (identity extension, DESIGN.md "Identity"): the admin creates them; a token sees its own. */

const Project = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Timestamp });

const presentProject = ({ id, name, createdAt }: ProjectRow) => ({ id, name, createdAt });

export const projectRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  app.get(
    "/v1/projects",
    {
      config: READER,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "List projects (extension)",
        description: "The admin token sees every project; any other token sees only its own project.",
        response: { 200: Type.Object({ projects: Type.Array(Project) }), ...errors(403) },
      },
    },
    async (request) => ({ projects: (await projectsVisibleTo(db, callerOf(request))).map(presentProject) }),
  );

  app.post(
    "/v1/projects",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Create a project (extension, global admin)",
        description: "The new project gets the built-in `local` cloud provider and its node pool.",
        body: Type.Object(
          {
            name: Type.String({
              pattern: PROJECT_NAME_PATTERN,
              description: "1 to 64 letters, digits, '-', '_' or '.'; unique",
            }),
          },
          { additionalProperties: false },
        ),
        response: { 201: Project, ...errors(400, 403, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(presentProject(await createProject(db, request.body.name))),
  );

  app.get(
    "/v1/projects/:projectId",
    {
      config: READER,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Get a project (extension)",
        params: V1ProjectParams,
        response: { 200: Project, ...errors(403, 404) },
      },
    },
    async (request) => presentProject(await getProject(db, request.params.projectId)),
  );
};
