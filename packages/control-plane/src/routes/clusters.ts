import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const clusterRoutes: FastifyPluginAsyncTypebox = async () => {};
