import type { IncomingHttpHeaders } from "node:http";
import { type Db, nodes, prepare } from "@keelson/db";
import { eq, sql } from "drizzle-orm";
import type { HostAuth } from "../../agents/link-domain.ts";
import { hashSecret } from "../identity/token-hash.ts";

/** Header an agent may send to name the host it believes it is; must match the credential. */
export const HOST_ID_HEADER = "x-keelson-host-id";

/**
 * Checks the host credential of a link upgrade (`Authorization: Bearer <credential>`) against
 * the stored sha256 hashes. Credentials carry 256 bits of randomness, so looking the hash up
 * through the unique index is safe and costs one indexed read per connect.
 */
export class HostAuthenticator {
  private readonly byHash;

  constructor(db: Db) {
    this.byHash = prepare(
      db,
      "host_by_credential",
      db
        .select({ id: nodes.id, projectId: nodes.projectId })
        .from(nodes)
        .where(eq(nodes.credentialHash, sql.placeholder("hash"))),
    );
  }

  async authenticate(headers: IncomingHttpHeaders): Promise<HostAuth> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "");
    if (!match) {
      return refuse("credential_missing", "the agent link needs 'Authorization: Bearer <host credential>'");
    }
    const row = await this.byHash.get({ hash: hashSecret(match[1] as string) });
    if (!row) {
      return refuse("credential_unknown", "the host credential is not valid (was the host deleted or re-registered?)");
    }
    const claimed = headers[HOST_ID_HEADER];
    if (claimed !== undefined && claimed !== row.id) {
      return refuse("host_mismatch", `the host credential does not belong to host ${String(claimed)}`);
    }
    return { ok: true, hostId: row.id, projectId: row.projectId };
  }
}

function refuse(code: string, message: string): HostAuth {
  return { ok: false, status: 401, code, message };
}
