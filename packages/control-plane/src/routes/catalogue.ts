import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const catalogueRoutes: FastifyPluginAsyncTypebox = async () => {};
