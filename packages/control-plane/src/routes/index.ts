import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { agentPackageRoutes } from "./agent-packages.ts";
import { agentRoutes } from "./agents.ts";
import { catalogueRoutes } from "./catalogue.ts";
import { cloudProviderRoutes } from "./cloud-providers.ts";
import { clusterActionRoutes } from "./cluster-actions.ts";
import { clusterRoutes } from "./clusters.ts";
import { eventRoutes } from "./events.ts";
import { externalClusterRoutes } from "./external-clusters.ts";
import { healthRoutes } from "./health.ts";
import { hostUpgradeRoutes } from "./host-upgrades.ts";
import { hostRoutes } from "./hosts.ts";
import { keystoneRoutes } from "./keystone.ts";
import { kubeconfigRoutes } from "./kubeconfig.ts";
import { nodePoolRoutes } from "./node-pools.ts";
import { nodeRoutes } from "./nodes.ts";
import { operationRoutes } from "./operations.ts";
import { projectRoutes } from "./projects.ts";

/** Every HTTP route of the control plane. Each module stays thin: parse, call the domain, present. */
export const registerRoutes: FastifyPluginAsyncTypebox = async (app) => {
  await app.register(healthRoutes);
  await app.register(projectRoutes);
  await app.register(keystoneRoutes);
  await app.register(clusterRoutes);
  await app.register(clusterActionRoutes);
  await app.register(kubeconfigRoutes);
  await app.register(catalogueRoutes);
  await app.register(cloudProviderRoutes);
  await app.register(nodePoolRoutes);
  await app.register(nodeRoutes);
  await app.register(externalClusterRoutes);
  await app.register(operationRoutes);
  await app.register(agentRoutes);
  await app.register(hostRoutes);
  await app.register(agentPackageRoutes);
  await app.register(hostUpgradeRoutes);
  await app.register(eventRoutes);
};
