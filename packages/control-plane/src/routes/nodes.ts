import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const nodeRoutes: FastifyPluginAsyncTypebox = async () => {};
