/**
 * The Secret, in the agent's namespace, where an external cluster's in-cluster agent keeps the
 * identity it registered with: the deployment YAML creates it empty and lets the agent's
 * ServiceAccount get and update it alone (control plane: agent-manifest.ts), and the agent
 * restores its state dir from it in a new pod (agent: in-cluster/identity-secret.ts).
 */
export const IN_CLUSTER_IDENTITY_SECRET = "keelson-agent-identity";

/**
 * The annotation naming the external cluster's registration (Keelson's id of it, one per
 * register, a new one after deregister and register) on the deployment YAML's identity Secret
 * and pod template. The agent keeps the identity under the registration the Secret named then
 * and restores it only while the Secret names the same one: `kubectl apply` of a new
 * registration's YAML changes the annotation but leaves the Secret's data (the YAML sets none),
 * and the new YAML's join token must win over the deleted identity still in it.
 */
export const IN_CLUSTER_REGISTRATION_ANNOTATION = "keelson.io/external-cluster";
