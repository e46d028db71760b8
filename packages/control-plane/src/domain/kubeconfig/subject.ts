import type { Identity } from "../identity/resolver.ts";

/**
 * Who a kubeconfig or web CLI session is issued to: the user behind a login token, else the
 * project token's id, else `admin`. Recorded with the credential and used as the Kubernetes user name.
 */
export function subjectOf(identity: Identity): string {
  if (identity.kind === "admin") return "admin";
  return identity.userId ?? identity.tokenId;
}
