/**
 * The Kubernetes group of everyone a Keelson kubeconfig is issued to: the O of its client
 * certificate, and the group the token review answers for its bearer token. Not
 * `system:masters`, which Kubernetes lets bypass RBAC for good: like kubeadm's
 * `kubeadm:cluster-admins`, it gets cluster-admin through the ClusterRoleBinding the first
 * master applies (the agent's bootstrap objects), so an operator can revoke it.
 */
export const CLUSTER_ADMINS_GROUP = "keelson:cluster-admins";
