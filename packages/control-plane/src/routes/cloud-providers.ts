import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const cloudProviderRoutes: FastifyPluginAsyncTypebox = async () => {};
