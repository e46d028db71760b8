/**
 * The Secret, in the agent's namespace, where an external cluster's in-cluster agent keeps the
 * identity it registered with: the deployment YAML creates it empty and lets the agent's
 * ServiceAccount get and update it alone (control plane: agent-manifest.ts), and the agent
 * restores its state dir from it in a new pod (agent: in-cluster/identity-secret.ts).
 */
export const IN_CLUSTER_IDENTITY_SECRET = "keelson-agent-identity";
