import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const nodePoolRoutes: FastifyPluginAsyncTypebox = async () => {};
