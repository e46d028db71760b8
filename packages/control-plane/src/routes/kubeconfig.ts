import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";

export const kubeconfigRoutes: FastifyPluginAsyncTypebox = async () => {};
