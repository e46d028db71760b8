import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "../domain/identity/passwords.ts";
import { createUser, deleteUser, listUsers, setUserRole, USER_NAME_MAX_LENGTH } from "../domain/identity/users.ts";
import {
  errorResponses as errors,
  IDENTITY_TAGS,
  NewRoleSchema,
  PROJECT_ADMIN,
  RoleSchema,
  Timestamp,
} from "./common-schemas.ts";
import { projectCollectionRoutes } from "./project-collection.ts";

/** A project's users, who log in the Keystone way (identity extension); passwords stored with scrypt. */

const User = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  name: Type.String(),
  role: RoleSchema,
  createdAt: Timestamp,
});

export const userRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  app.put(
    "/v1/projects/:projectId/users/:userId/role",
    {
      config: PROJECT_ADMIN,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Change a user's role (extension, project admin)",
        description:
          "Ends the user's login sessions; a user made `reader` also loses the kubeconfig tokens it was issued.",
        params: Type.Object({ projectId: Type.String(), userId: Type.String() }),
        body: Type.Object({ role: RoleSchema }, { additionalProperties: false }),
        response: { 200: User, ...errors(400, 403, 404) },
      },
    },
    async (request) => setUserRole(db, request.params.projectId, request.params.userId, request.body.role),
  );

  projectCollectionRoutes(app, {
    plural: "users",
    idParam: "userId",
    item: User,
    config: PROJECT_ADMIN,
    listSummary: "List a project's users (extension, project admin)",
    deleteSummary: "Delete a user and end its login sessions (extension, project admin)",
    list: (projectId) => listUsers(db, projectId),
    remove: (projectId, id) => deleteUser(db, projectId, id),
    create: {
      summary: "Create a user for the Keystone-style login (extension, project admin)",
      description: "The password is stored as an scrypt hash and never returned.",
      body: Type.Object(
        {
          name: Type.String({
            minLength: 1,
            maxLength: USER_NAME_MAX_LENGTH,
            description: "Unique in the project; printable, no leading or trailing whitespace",
          }),
          password: Type.String({
            minLength: PASSWORD_MIN_LENGTH,
            maxLength: PASSWORD_MAX_LENGTH,
            writeOnly: true,
          }),
          role: NewRoleSchema,
        },
        { additionalProperties: false },
      ),
      created: User,
      errorCodes: [400, 403, 404, 409],
      run: (projectId, body) => createUser(db, projectId, body),
    },
  });
};
