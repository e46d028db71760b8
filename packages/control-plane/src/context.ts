import type { Db } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";
import type { AgentHub } from "./agents/hub.ts";
import type { Catalogue } from "./catalogue/catalogue.ts";
import type { IdentityResolver } from "./identity/identity.ts";
import type { OperationRunner } from "./operations/runner.ts";
import type { SecretCipher } from "./secrets/cipher.ts";

/** Everything a route or domain module needs from the running control plane. */
export interface Keelson {
  readonly db: Db;
  readonly dataDir: string;
  readonly cipher: SecretCipher;
  readonly catalogue: Catalogue;
  readonly identity: IdentityResolver;
  readonly runner: OperationRunner;
  readonly log: FastifyBaseLogger;
  /** The agent link: sessions, commands to hosts, presence. */
  readonly agents: AgentHub;
}

declare module "fastify" {
  interface FastifyInstance {
    keelson: Keelson;
  }
}
