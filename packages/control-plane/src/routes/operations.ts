import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const operationRoutes: FastifyPluginAsyncTypebox = async () => {};
