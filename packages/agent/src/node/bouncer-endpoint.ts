import { randomBytes, timingSafeEqual } from "node:crypto";
import { CLUSTER_ADMINS_GROUP } from "@keelson/protocol";
import type { FastifyInstance } from "fastify";
import type { StateDir } from "../state-dir.ts";

/**
 * Where the node bouncer (a separate supervised process) asks whether a bearer token is one the
 * control plane issued for this node's cluster: a route on the agent's local API that relays
 * the question over the link (`cluster-token.verify`). It answers the bouncer's verifier
 * contract `{valid, username?, groups?}`. The path carries a secret from the state dir, so only
 * the bouncer (whose command line the agent wrote) can use this as a token oracle.
 */

export const BOUNCER_SECRET_FILE = "bouncer-verify.secret";
const PREFIX = "/v1/node/bouncer-verify/";

export interface BouncerEndpointOptions {
  stateDir: StateDir;
  /** The subject the token was issued to, or null; rejects when the control plane cannot be asked. */
  verify: (token: string) => Promise<string | null>;
}

export function bouncerSecret(stateDir: StateDir): string {
  const existing = stateDir.readText(BOUNCER_SECRET_FILE)?.trim();
  if (existing && /^[0-9a-f]{64}$/.test(existing)) return existing;
  const secret = randomBytes(32).toString("hex");
  stateDir.writeText(BOUNCER_SECRET_FILE, `${secret}\n`);
  return secret;
}

export function registerBouncerEndpoint(app: FastifyInstance, options: BouncerEndpointOptions): { path: string } {
  const secret = bouncerSecret(options.stateDir);
  const expected = Buffer.from(secret);
  app.post<{ Params: { secret: string }; Body: { token?: unknown } }>(`${PREFIX}:secret`, async (request, reply) => {
    const given = Buffer.from(request.params.secret);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return reply.status(404).send({ code: "route_not_found", message: "no such route" });
    }
    const token = request.body?.token;
    if (typeof token !== "string" || token.length === 0 || token.length > 1024) {
      return reply
        .status(400)
        .send({ code: "invalid_field", field: "token", message: "token must be a string of 1 to 1024 characters" });
    }
    try {
      const subject = await options.verify(token);
      // Every kubeconfig Keelson issues is a cluster admin's, bearer or certificate alike.
      return subject === null ? { valid: false } : { valid: true, username: subject, groups: [CLUSTER_ADMINS_GROUP] };
    } catch (err) {
      // The bouncer turns a non-200 into a refusal: without the control plane no token is trusted.
      return reply.status(503).send({ code: "unavailable", message: (err as Error).message });
    }
  });
  return { path: `${PREFIX}${secret}` };
}

/** The URL the bouncer calls, from the address the local API listens on. */
export function bouncerVerifyUrl(listen: { host: string; port: number }, path: string): string {
  const host =
    listen.host === "0.0.0.0" || listen.host === ""
      ? "127.0.0.1"
      : listen.host === "::"
        ? "[::1]"
        : listen.host.includes(":")
          ? `[${listen.host}]`
          : listen.host;
  return `http://${host}:${listen.port}${path}`;
}
