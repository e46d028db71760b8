import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "../domain/identity/passwords.ts";
import { createUser, deleteUser, listUsers, USER_NAME_MAX_LENGTH } from "../domain/identity/users.ts";
import { Timestamp } from "./common-schemas.ts";
import { projectCollectionRoutes } from "./project-collection.ts";

/** A project's users, who log in the Keystone way (identity extension); passwords stored with scrypt. */

const User = Type.Object({ id: Type.String(), projectId: Type.String(), name: Type.String(), createdAt: Timestamp });

export const userRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  projectCollectionRoutes(app, {
    plural: "users",
    idParam: "userId",
    item: User,
    adminOnly: true,
    listSummary: "List a project's users (extension, admin)",
    deleteSummary: "Delete a user and end its login sessions (extension, admin)",
    list: (projectId) => listUsers(db, projectId),
    remove: (projectId, id) => deleteUser(db, projectId, id),
    create: {
      summary: "Create a user for the Keystone-style login (extension, admin)",
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
        },
        { additionalProperties: false },
      ),
      created: User,
      errorCodes: [400, 403, 404, 409],
      run: (projectId, body) => createUser(db, projectId, body),
    },
  });
};
