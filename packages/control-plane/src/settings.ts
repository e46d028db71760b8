import { hostname } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { checkDatabaseUrl, DATABASE_URL_RULE } from "@keelson/db";
import { REPLICA_ID, REPLICA_ID_RULE } from "@keelson/protocol";
import { parseListen, parseSettings, Setting, SettingsError } from "@keelson/settings";
import { type Static, Type } from "typebox";
import { decideTlsMode, type TlsMode } from "./tls/mode.ts";

/**
 * Every setting of keelson-server, in one schema (DESIGN.md "Processes" names the first five).
 * `readServerSettings` parses it once at start; the result travels in the app's context
 * (`keelson.settings`), and no module reads the environment for a setting of its own.
 */
export const ServerSettingsSchema = Type.Object({
  listen: Setting.listen("KEELSON_LISTEN", "127.0.0.1:8080", "Address and port of the REST API and the agent link."),
  dataDir: Type.String({
    env: "KEELSON_DATA_DIR",
    default: "./.keelson",
    rule: "a directory (created if missing)",
    description:
      "keelson.sqlite, secret.key, admin-token, webcli.key, the package shelves and `tls/` (KEELSON_TLS=auto).",
  }),
  adminToken: Type.Optional(
    Type.String({
      env: "KEELSON_ADMIN_TOKEN",
      secret: true,
      rule: "text",
      description: "The admin token; if unset, generated on first start into the data dir (mode 0600).",
    }),
  ),
  databaseUrl: Type.Optional(
    Type.String({
      env: "KEELSON_DATABASE_URL",
      secret: true,
      check: checkDatabaseUrl,
      rule: DATABASE_URL_RULE,
      defaultText: "SQLite: keelson.sqlite in the data dir",
      description:
        "PostgreSQL for production and for several replicas, e.g. `postgres://keelson@db.internal:5432/keelson?sslmode=verify-full&sslrootcert=/etc/keelson/db-ca.pem`.",
    }),
  ),
  databasePasswordFile: Type.Optional(
    Type.String({
      env: "KEELSON_DATABASE_PASSWORD_FILE",
      rule: "a readable file; its first line is the password",
      description: "The PostgreSQL password, kept out of the URL (and out of the process's environment).",
    }),
  ),
  secretsKeyFile: Type.Optional(
    Type.String({
      env: "KEELSON_SECRETS_KEY_FILE",
      rule: "a readable file; its first line is 32 bytes in base64 (`openssl rand -base64 32`)",
      defaultText: "none: required on PostgreSQL, unused on SQLite",
      description:
        'PostgreSQL: the key that seals the secrets every replica shares (the sealing key, admin token, web CLI key, TLS CA), kept in the database; the same file on every replica (README "Shared secrets").',
    }),
  ),
  metricsTokenFile: Type.Optional(
    Type.String({
      env: "KEELSON_METRICS_TOKEN_FILE",
      rule: "a readable file; its first line is the token",
      defaultText: "none: /metrics takes the admin token only",
      description:
        "The scrape token of `GET /metrics` (Prometheus: `authorization.credentials_file`), so a monitoring system needs no admin token.",
    }),
  ),
  webcliKubectl: Type.String({
    env: "KEELSON_WEBCLI_KUBECTL",
    default: "/usr/bin/kubectl",
    check: (value: string) => (isAbsolute(value) ? undefined : "must be an absolute path to kubectl"),
    rule: "an absolute path to kubectl",
    description: "The kubectl a web CLI session runs (the only program it can run).",
  }),
  webcliCommandTimeoutMs: Type.Integer({
    env: "KEELSON_WEBCLI_COMMAND_TIMEOUT_MS",
    default: 60_000,
    minimum: 1_000,
    maximum: 3_600_000,
    unit: "milliseconds",
    description: "Longest one web CLI command runs before it is killed (`kubectl logs -f` ends here).",
  }),
  webcliSessionTimeoutMs: Type.Integer({
    env: "KEELSON_WEBCLI_SESSION_TIMEOUT_MS",
    default: 1_800_000,
    minimum: 10_000,
    maximum: 86_400_000,
    unit: "milliseconds",
    description: "Longest a web CLI session stays open; its kubeconfig credential expires with it.",
  }),
  webcliOutputLimitBytes: Type.Integer({
    env: "KEELSON_WEBCLI_OUTPUT_LIMIT_BYTES",
    default: 1_048_576,
    minimum: 1_024,
    maximum: 67_108_864,
    unit: "bytes",
    description:
      "Most output (stdout and stderr together) one web CLI command may send; past it the command is killed.",
  }),
  listCacheBytes: Type.Integer({
    env: "KEELSON_LIST_CACHE_BYTES",
    default: 67_108_864,
    minimum: 0,
    maximum: 4_294_967_296,
    unit: "bytes",
    description:
      "Most memory the cached answers of the cluster reads may take, their gzip and brotli encodings included (0 keeps none): 1,000 clusters take about 3.5 MB per API version.",
  }),
  eventStreamBufferBytes: Type.Integer({
    env: "KEELSON_EVENT_STREAM_BUFFER_BYTES",
    default: 8_388_608,
    minimum: 65_536,
    maximum: 1_073_741_824,
    unit: "bytes",
    description:
      "Most unsent bytes one `GET /v4/{project}/events` stream may hold for a client that stopped reading; past it the server ends that stream (the client reconnects).",
  }),
  eventRetentionMinutes: Type.Integer({
    env: "KEELSON_EVENT_RETENTION_MINUTES",
    default: 60,
    minimum: 1,
    maximum: 10_080,
    unit: "minutes",
    description:
      "How long the events of `GET /v4/{project}/events` are kept, for clients that reconnect with `Last-Event-ID` (on any replica); older ones are pruned with the replica heartbeat.",
  }),
  eventRetentionRows: Type.Integer({
    env: "KEELSON_EVENT_RETENTION_ROWS",
    default: 1_000_000,
    minimum: 1_000,
    maximum: 100_000_000,
    unit: "events",
    description:
      "Most stored events kept, whatever their age (a 1,000-node rollout is about 3,000); the oldest beyond it are pruned with the replica heartbeat.",
  }),
  path: Type.String({
    env: "PATH",
    default: "/usr/sbin:/usr/bin:/sbin:/bin",
    rule: "directories, colon-separated",
    description:
      "Where `keelson-server backup` and `restore` look up PostgreSQL's client programs when /usr/lib/postgresql has none.",
  }),
  databasePoolSize: Type.Integer({
    env: "KEELSON_DATABASE_POOL_SIZE",
    default: 10,
    minimum: 1,
    maximum: 500,
    description: "Most PostgreSQL connections this server holds at once.",
  }),
  databaseStatementTimeoutMs: Type.Integer({
    env: "KEELSON_DATABASE_STATEMENT_TIMEOUT_MS",
    default: 30_000,
    minimum: 100,
    maximum: 3_600_000,
    unit: "milliseconds",
    description: "PostgreSQL's statement_timeout for this server's sessions.",
  }),
  databaseConnectTimeoutMs: Type.Integer({
    env: "KEELSON_DATABASE_CONNECT_TIMEOUT_MS",
    default: 10_000,
    minimum: 1_000,
    maximum: 600_000,
    unit: "milliseconds",
    description: "One attempt to connect to PostgreSQL.",
  }),
  databaseStartTimeoutMs: Type.Integer({
    env: "KEELSON_DATABASE_START_TIMEOUT_MS",
    default: 60_000,
    minimum: 0,
    maximum: 86_400_000,
    unit: "milliseconds",
    description:
      "How long an unreachable or refusing PostgreSQL is retried at start (with backoff) before the server gives up, naming the database's answer.",
  }),
  logLevel: Setting.logLevel(),
  sessionTtlHours: Type.Number({
    env: "KEELSON_SESSION_TTL_HOURS",
    default: 24,
    exclusiveMinimum: 0,
    maximum: 8760,
    unit: "hours",
    description: "Lifetime of Keystone-style login tokens.",
  }),
  auditRetentionDays: Type.Integer({
    env: "KEELSON_AUDIT_RETENTION_DAYS",
    default: 365,
    minimum: 0,
    maximum: 36500,
    unit: "days",
    description: "How long audit records are kept (GET /v1/audit); older ones are pruned hourly. 0: kept forever.",
  }),
  agentCommandRetentionMinutes: Type.Integer({
    env: "KEELSON_AGENT_COMMAND_RETENTION_MINUTES",
    default: 60,
    minimum: 1,
    maximum: 10_080,
    unit: "minutes",
    description:
      "How long a command to an agent is kept after its timeout (answered or not), so that a step issuing it again gets its answer; then it is deleted.",
  }),
  publicUrl: Type.Optional(
    Setting.httpUrl("KEELSON_PUBLIC_URL", "The control plane's URL as hosts reach it, for package downloads.", {
      defaultText: "the address of the request",
    }),
  ),
  tls: Type.Optional(
    Type.Union([Type.Literal("auto"), Type.Literal("files"), Type.Literal("off")], {
      env: "KEELSON_TLS",
      defaultText: "`files` if KEELSON_TLS_CERT_FILE is set, else `off` on a loopback listener, else `auto`",
      description:
        "HTTPS for the API and the agent link: `auto` (a CA Keelson makes in the data dir, `tls/`, and a server certificate it renews itself), `files` (KEELSON_TLS_CERT_FILE and KEELSON_TLS_KEY_FILE), or `off` (plain HTTP).",
    }),
  ),
  tlsCertFile: Type.Optional(
    Type.String({
      env: "KEELSON_TLS_CERT_FILE",
      rule: "a readable PEM file",
      description:
        "`files`: the server certificate (re-read hourly, so a renewed file is picked up without a restart).",
    }),
  ),
  tlsKeyFile: Type.Optional(
    Type.String({
      env: "KEELSON_TLS_KEY_FILE",
      rule: "a readable PEM file",
      description: "`files`: the server certificate's private key.",
    }),
  ),
  tlsChainFile: Type.Optional(
    Type.String({
      env: "KEELSON_TLS_CHAIN_FILE",
      rule: "a readable PEM file",
      description:
        "`files`: the intermediate certificates and, last, the root CA; served at /v1/ca, and the root's hash goes in join-token answers.",
    }),
  ),
  tlsServerNames: Type.Optional(
    Type.String({
      env: "KEELSON_TLS_SERVER_NAMES",
      rule: "DNS names or IP addresses, comma-separated",
      description:
        "`auto`: more names for the server certificate, besides the host of KEELSON_PUBLIC_URL and the listen address; with replicas, the balanced address (load balancer or VIP) in front of them.",
    }),
  ),
  tlsCertValidHours: Type.Number({
    env: "KEELSON_TLS_CERT_VALID_HOURS",
    default: 2160,
    minimum: 0.001,
    maximum: 8760,
    unit: "hours",
    description:
      "`auto`: lifetime of the server certificate; it is renewed once less than a third of it remains (checked hourly, or every tenth of the lifetime if shorter).",
  }),
  tlsNextCa: Type.Boolean({
    env: "KEELSON_TLS_NEXT_CA",
    default: false,
    description:
      '`auto`, CA rotation: make a next CA in `tls/next/` (once) and serve it in the CA bundle beside the current one, which still signs; agents add it to their trust when they link (README "Rotating the CA").',
  }),
  insecureHttp: Type.Boolean({
    env: "KEELSON_INSECURE_HTTP",
    default: false,
    description:
      "Acknowledges plain HTTP (KEELSON_TLS=off) on a listener that is not loopback, e.g. behind a TLS-terminating proxy; a warning is logged at every start.",
  }),
  trustProxy: Type.Optional(
    Type.String({
      env: "KEELSON_TRUST_PROXY",
      rule: "addresses or CIDRs, comma-separated",
      description:
        "Behind a reverse proxy: its addresses; client addresses (login throttle, logs) then come from X-Forwarded-For. Unset: X-Forwarded-For is ignored.",
    }),
  ),
  agentHeartbeatMs: Type.Integer({
    env: "KEELSON_AGENT_HEARTBEAT_MS",
    default: 15_000,
    minimum: 100,
    maximum: 600_000,
    unit: "milliseconds",
    description: "Agent link ping interval; a peer silent for two intervals is cut off.",
  }),
  agentLinkLimit: Type.Optional(
    Type.Integer({
      env: "KEELSON_AGENT_LINK_LIMIT",
      minimum: 1,
      defaultText: "the open-file limit less 10% (at least 64)",
      description:
        "Most agent links held at once; beyond it agents get 503 with Retry-After. The reserve keeps the API, database and packages working at the open-file limit.",
    }),
  ),
  nodeConvergeTimeoutMs: Type.Integer({
    env: "KEELSON_NODE_CONVERGE_TIMEOUT_MS",
    default: 600_000,
    minimum: 1,
    unit: "milliseconds",
    description: "How long an attached node may take to reach ok.",
  }),
  nodeLeaveTimeoutMs: Type.Integer({
    env: "KEELSON_NODE_LEAVE_TIMEOUT_MS",
    default: 900_000,
    minimum: 1,
    unit: "milliseconds",
    description: "How long a detached node may take to drain, stop and clean.",
  }),
  nodeRestartTimeoutMs: Type.Integer({
    env: "KEELSON_NODE_RESTART_TIMEOUT_MS",
    default: 600_000,
    minimum: 1,
    unit: "milliseconds",
    description: "How long a node may take to come back from a restart or upgrade.",
  }),
  hostUpgradeTimeoutMs: Type.Integer({
    env: "KEELSON_HOST_UPGRADE_TIMEOUT_MS",
    default: 600_000,
    minimum: 1,
    unit: "milliseconds",
    description: "How long a host may take to come back at a new agent version.",
  }),
  // The AWS SDK's own endpoint variables (its "service-specific endpoints" configuration), read
  // here once like every setting and handed to the SDK clients: tests, private regions and
  // proxies point Keelson at another endpoint with no code change.
  awsEndpointUrl: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL",
      "AWS: one endpoint for every AWS service Keelson calls (STS, EC2, Route 53, EKS).",
      {
        defaultText: "each service's public AWS endpoint",
      },
    ),
  ),
  awsEndpointUrlSts: Type.Optional(
    Setting.httpUrl("AWS_ENDPOINT_URL_STS", "AWS: the STS endpoint (credential checks); wins over AWS_ENDPOINT_URL.", {
      defaultText: "AWS_ENDPOINT_URL",
    }),
  ),
  awsEndpointUrlEc2: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL_EC2",
      "AWS: the EC2 endpoint (regions, zones, instance types, key pairs, images, VPCs); wins over AWS_ENDPOINT_URL.",
      { defaultText: "AWS_ENDPOINT_URL" },
    ),
  ),
  awsEndpointUrlRoute53: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL_ROUTE_53",
      "AWS: the Route 53 endpoint (hosted zones); wins over AWS_ENDPOINT_URL.",
      { defaultText: "AWS_ENDPOINT_URL" },
    ),
  ),
  awsEndpointUrlEks: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL_EKS",
      "AWS: the EKS endpoint (external clusters: discover, register); wins over AWS_ENDPOINT_URL.",
      { defaultText: "AWS_ENDPOINT_URL" },
    ),
  ),
  awsEndpointUrlAutoScaling: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL_AUTO_SCALING",
      "AWS: the Auto Scaling endpoint (auto deploy's worker groups); wins over AWS_ENDPOINT_URL.",
      { defaultText: "AWS_ENDPOINT_URL" },
    ),
  ),
  awsEndpointUrlElasticLoadBalancingV2: Type.Optional(
    Setting.httpUrl(
      "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2",
      "AWS: the ELBv2 endpoint (auto deploy's API load balancer); wins over AWS_ENDPOINT_URL.",
      { defaultText: "AWS_ENDPOINT_URL" },
    ),
  ),
  // Azure and GCP endpoints, for tests, sovereign or private clouds and proxies. AZURE_AUTHORITY_HOST
  // is @azure/identity's own variable and CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE gcloud's; the ARM
  // SDK has no variable for its endpoint, so that one is Keelson's.
  azureAuthorityHost: Type.Optional(
    Setting.httpUrl("AZURE_AUTHORITY_HOST", "Azure: the Microsoft Entra ID authority host that issues the tokens.", {
      defaultText: "https://login.microsoftonline.com",
    }),
  ),
  azureResourceManagerUrl: Type.Optional(
    Setting.httpUrl(
      "KEELSON_AZURE_RESOURCE_MANAGER_URL",
      "Azure: the Resource Manager endpoint (the subscription's locations).",
      { defaultText: "https://management.azure.com" },
    ),
  ),
  gcpComputeEndpoint: Type.Optional(
    Setting.httpUrl(
      "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
      "GCP: the Compute Engine API endpoint (regions); tokens come from the key file's `token_uri`.",
      { defaultText: "https://compute.googleapis.com/compute/v1/" },
    ),
  ),
  cloudCaFile: Type.Optional(
    Type.String({
      env: "KEELSON_CLOUD_CA_FILE",
      rule: "a readable PEM file",
      description:
        "CA certificates trusted besides the public ones for the Azure endpoints (which must be HTTPS), for a private cloud's own CA.",
    }),
  ),
  cloudCallTimeoutMs: Type.Integer({
    env: "KEELSON_CLOUD_CALL_TIMEOUT_MS",
    default: 15_000,
    minimum: 100,
    maximum: 600_000,
    unit: "milliseconds",
    description: "Longest a request waits for one cloud API call (retries included); past it the request answers 503.",
  }),
  awsJoinTokenMinutes: Type.Integer({
    env: "KEELSON_AWS_JOIN_TOKEN_MINUTES",
    default: 10_080,
    minimum: 2,
    maximum: 10_080,
    unit: "minutes",
    description:
      "AWS auto deploy: how long a cluster's instance join token (in its launch templates' user data) lasts; at most a week.",
  }),
  awsJoinTokenRenewMinutes: Type.Integer({
    env: "KEELSON_AWS_JOIN_TOKEN_RENEW_MINUTES",
    default: 1_440,
    minimum: 1,
    unit: "minutes",
    description:
      "AWS auto deploy: a cluster's instance join token this close to expiry is replaced, with new launch template versions; less than KEELSON_AWS_JOIN_TOKEN_MINUTES.",
  }),
  replicaId: Type.Optional(
    Type.String({
      env: "KEELSON_REPLICA_ID",
      check: (value: string) => (REPLICA_ID.test(value) ? undefined : REPLICA_ID_RULE),
      rule: REPLICA_ID_RULE,
      defaultText: "the host name",
      description:
        "This control plane's name among the replicas sharing one PostgreSQL database (GET /v1/replicas); each replica needs its own.",
    }),
  ),
  operationLeaseMs: Type.Integer({
    env: "KEELSON_OPERATION_LEASE_MS",
    default: 10_000,
    minimum: 1_000,
    maximum: 600_000,
    unit: "milliseconds",
    description:
      "How long a replica's claim on an operation holds, by the database's clock, without a renewal; after it another replica takes the operation over.",
  }),
  operationLeaseRenewMs: Type.Integer({
    env: "KEELSON_OPERATION_LEASE_RENEW_MS",
    default: 2_000,
    minimum: 100,
    maximum: 300_000,
    unit: "milliseconds",
    description:
      "How often a replica renews its leases and heartbeat and looks for operations to take over; below the deadline.",
  }),
  operationLeaseDeadlineMs: Type.Integer({
    env: "KEELSON_OPERATION_LEASE_DEADLINE_MS",
    default: 7_000,
    minimum: 200,
    maximum: 600_000,
    unit: "milliseconds",
    description:
      "A replica that has not renewed its leases for this long stops acting on its operations (and /readyz answers 503) until it renews again; below the lease, so it stops before anyone takes over.",
  }),
  replicaRetentionMs: Type.Integer({
    env: "KEELSON_REPLICA_RETENTION_MS",
    default: 86_400_000,
    minimum: 10_000,
    maximum: 31_536_000_000,
    unit: "milliseconds",
    description:
      "How long GET /v1/replicas keeps listing a replica that stopped heartbeating without a graceful stop (a crash); more than the lease.",
  }),
  nodeEnv: Setting.nodeEnv(),
  printSummary: Type.Boolean({
    env: "KEELSON_PRINT_SUMMARY",
    default: false,
    defaultText: "`false` (printed anyway on a terminal)",
    description: "Print the plain start-up summary (URL, admin token file, default project) on stdout.",
  }),
});

export type ServerSettings = Static<typeof ServerSettingsSchema> & {
  /** From `listen`, split once. */
  readonly host: string;
  readonly port: number;
  /** KEELSON_TLS as decided from the listener and the files configured (tls/mode.ts). */
  readonly tlsMode: TlsMode;
  /** KEELSON_REPLICA_ID, or the host name's. */
  readonly replicaId: string;
};

/** Parses the server's settings from the environment and flags; throws `SettingsError`. */
export function readServerSettings(
  env: Record<string, string | undefined>,
  argv: readonly string[] = [],
): ServerSettings {
  const parsed = parseSettings(ServerSettingsSchema, { env, argv });
  const { host, port } = parseListen(parsed.listen) as { host: string; port: number };
  const tlsMode = decideTlsMode({ ...parsed, host });
  checkLeaseTimes(parsed);
  const replicaId = parsed.replicaId ?? defaultReplicaId();
  return Object.freeze({ ...parsed, dataDir: resolve(parsed.dataDir), host, port, tlsMode, replicaId });
}

/**
 * Renewals must come well inside the deadline, and the deadline inside the lease: a replica
 * stops acting on its operations before any other may take them over. Likewise an instance join
 * token is renewed before it expires.
 */
function checkLeaseTimes(s: Static<typeof ServerSettingsSchema>): void {
  if (s.operationLeaseDeadlineMs >= s.operationLeaseMs) {
    throw new SettingsError(
      `KEELSON_OPERATION_LEASE_DEADLINE_MS: must be less than KEELSON_OPERATION_LEASE_MS (${s.operationLeaseMs}), got ${s.operationLeaseDeadlineMs}`,
    );
  }
  if (s.replicaRetentionMs <= s.operationLeaseMs) {
    throw new SettingsError(
      `KEELSON_REPLICA_RETENTION_MS: must be more than KEELSON_OPERATION_LEASE_MS (${s.operationLeaseMs}), got ${s.replicaRetentionMs}`,
    );
  }
  if (s.awsJoinTokenRenewMinutes >= s.awsJoinTokenMinutes) {
    throw new SettingsError(
      `KEELSON_AWS_JOIN_TOKEN_RENEW_MINUTES: must be less than KEELSON_AWS_JOIN_TOKEN_MINUTES (${s.awsJoinTokenMinutes}), got ${s.awsJoinTokenRenewMinutes}`,
    );
  }
  if (s.operationLeaseRenewMs * 2 > s.operationLeaseDeadlineMs) {
    throw new SettingsError(
      `KEELSON_OPERATION_LEASE_RENEW_MS: must be at most half of KEELSON_OPERATION_LEASE_DEADLINE_MS (${s.operationLeaseDeadlineMs}), got ${s.operationLeaseRenewMs}`,
    );
  }
}

/** The host name's first label, cut to what KEELSON_REPLICA_ID allows. */
export function defaultReplicaId(name = hostname()): string {
  const label = (name.split(".")[0] ?? "").replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[^A-Za-z0-9]+/, "");
  return label.slice(0, 63) || "keelson";
}

/** The defaults, for apps built in tests; `overrides` shorten timeouts and the like. */
export function defaultServerSettings(overrides: Partial<ServerSettings> = {}): ServerSettings {
  return Object.freeze({ ...readServerSettings({}), ...overrides });
}
