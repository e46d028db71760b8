import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const projectRoutes: FastifyPluginAsyncTypebox = async () => {};
