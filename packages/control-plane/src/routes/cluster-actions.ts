import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const clusterActionRoutes: FastifyPluginAsyncTypebox = async () => {};
