import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const externalClusterRoutes: FastifyPluginAsyncTypebox = async () => {};
