/**
 * How an etcd member of a Keelson cluster is named and reached. The etcd phase on a master
 * (packages/agent/src/phases/impl/etcd.ts) listens there, and the control plane lists the
 * members the same way in `node.join` (`etcdMembers`), so both sides must build them here.
 * Members use mutual TLS on both URLs, bound to the node's primary IP.
 */

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

export interface EtcdMemberUrls {
  /** The member name: the node's host id (unique even when hostnames repeat). */
  name: string;
  peerUrl: string;
  clientUrl: string;
}

/** `https://<ip>:<port>`, with an IPv6 address in brackets. */
export function etcdUrl(primaryIp: string, port: number): string {
  const host = primaryIp.includes(":") ? `[${primaryIp}]` : primaryIp;
  return `https://${host}:${port}`;
}

export function etcdMemberFor(
  hostId: string,
  primaryIp: string,
  ports: { client?: number; peer?: number } = {},
): EtcdMemberUrls {
  return {
    name: hostId,
    peerUrl: etcdUrl(primaryIp, ports.peer ?? ETCD_PEER_PORT),
    clientUrl: etcdUrl(primaryIp, ports.client ?? ETCD_CLIENT_PORT),
  };
}
