import type { Db, Store } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";
import type { AgentHub } from "./agents/hub.ts";
import type { Catalogue } from "./domain/catalogue/catalogue.ts";
import type { CloudClientCache } from "./domain/cloud-providers/client-cache.ts";
import type { EventLog } from "./domain/events/event-log.ts";
import type { OpenStreams } from "./domain/events/open-streams.ts";
import type { ProjectEventFanout } from "./domain/events/project-events.ts";
import type { AdminTokenSource } from "./domain/identity/admin-token.ts";
import type { IdentityResolver } from "./domain/identity/resolver.ts";
import type { ControlPlaneMetrics } from "./metrics/registry.ts";
import type { ReplicaDrain } from "./replicas/drain.ts";
import type { OperationRunner } from "./runner/runner.ts";
import type { SecretCipher } from "./secrets/cipher.ts";
import type { ServerSettings } from "./settings.ts";
import type { StorageCondition } from "./storage/condition.ts";
import type { ServerTls } from "./tls/server-tls.ts";

/** Everything a route or domain module needs from the running control plane. */
export interface Keelson {
  /** Every setting of the server, parsed once at start (settings.ts). */
  readonly settings: ServerSettings;
  /** The store (SQLite or PostgreSQL) and its query builders (`store.db`). */
  readonly store: Store;
  readonly db: Db;
  readonly dataDir: string;
  readonly cipher: SecretCipher;
  readonly catalogue: Catalogue;
  readonly identity: IdentityResolver;
  /** Where the admin token is kept and how it is rotated (secrets/server-secrets.ts). */
  readonly adminToken: AdminTokenSource;
  /** The HMAC key of web CLI tokens, the same on every replica. */
  readonly webcliKey: Buffer;
  readonly runner: OperationRunner;
  /** This replica's drain, and the asking of any replica's (POST /v1/replicas/{id}/drain). */
  readonly drain: ReplicaDrain;
  readonly log: FastifyBaseLogger;
  /** Whether the data dir's disk (or PostgreSQL's) is full: /readyz says so, writes answer 507. */
  readonly storage: StorageCondition;
  /** The agent link: sessions, commands to hosts, presence. */
  readonly agents: AgentHub;
  /** The stored events of the project event streams (Last-Event-ID replays read it). */
  readonly eventLog: EventLog;
  /** The events streams served here, ended together at close and at a drain. */
  readonly eventStreams: OpenStreams;
  /** Records every operation and node event and hands each to this replica's event streams. */
  readonly projectEvents: ProjectEventFanout;
  /** The Prometheus registry of GET /metrics and the counters modules add to. */
  readonly metrics: ControlPlaneMetrics;
  /** The cloud SDK clients (AWS, Azure, GCP) kept between requests (destroyed when the server closes). */
  readonly cloudClients: CloudClientCache;
  /** HTTPS and its CA (KEELSON_TLS=auto or files); undefined when the server speaks plain HTTP. */
  readonly tls: ServerTls | undefined;
}

declare module "fastify" {
  interface FastifyInstance {
    keelson: Keelson;
  }
}
