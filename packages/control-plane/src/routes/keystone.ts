import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const keystoneRoutes: FastifyPluginAsyncTypebox = async () => {};
