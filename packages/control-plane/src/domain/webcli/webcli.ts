import type { Keelson } from "../../context.ts";
import { findCluster as findClusterInProject } from "../clusters/views.ts";
import type { Identity } from "../identity/resolver.ts";
import { subjectOf } from "../kubeconfig/subject.ts";
import { issueWebCliToken } from "./tokens.ts";

/** A web CLI session token for one cluster of the caller's project. */
export async function issueWebCliSession(
  keelson: Pick<Keelson, "db" | "webcliKey">,
  req: { projectId: string; clusterId: string; identity: Identity; now?: Date },
): Promise<{ token: string }> {
  const cluster = await findClusterInProject(keelson.db, req.projectId, req.clusterId);
  const { token } = issueWebCliToken(keelson.webcliKey, {
    projectId: cluster.projectId,
    clusterId: cluster.id,
    subject: subjectOf(req.identity),
    now: req.now,
  });
  return { token };
}
