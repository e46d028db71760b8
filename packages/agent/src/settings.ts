import { isIP } from "node:net";
import { resolve } from "node:path";
import { CA_HASH_PATTERN, type ControlPlanePin, checkProxyUrl, PROXY_URL_RULE } from "@keelson/protocol";
import { parseListen, parseSettings, Setting } from "@keelson/settings";
import { type Static, type TSchema, Type } from "typebox";
import type { InClusterApi } from "./in-cluster/cluster-reading.ts";
import { CONTROL_PLANES_RULE, checkControlPlanes, splitControlPlanes } from "./link/control-planes.ts";
import { checkPinsSetting, PINS_SETTING_RULE, parsePinsSetting, strangerPin } from "./link/pins.ts";
import { pinnedHashes } from "./link/trust.ts";
import { DEFAULT_TIMEOUTS } from "./phases/config.ts";
import { DEFAULT_RECONCILE } from "./phases/reconciler.ts";

/**
 * Every setting of keelson-agent (the launcher and the agent it runs), in one schema. The
 * agent parses it once at start (main.ts) and passes the result down; the launcher reads the
 * part it needs (`readLauncherSettings`). Production needs only the first three; the node
 * knobs at the end let tests make hosts converge in seconds.
 */

const ms = (env: string, fallback: number, description: string, minimum = 1) =>
  Type.Integer({ env, default: fallback, minimum, unit: "milliseconds", description });

const optionalText = (env: string, rule: string, description: string, check?: (value: string) => string | undefined) =>
  Type.Optional(Type.String({ env, rule, description, ...(check ? { check } : {}) }));

export const AgentSettingsSchema = Type.Object({
  controlPlane: Type.String({
    env: "KEELSON_CONTROL_PLANE",
    check: checkControlPlanes,
    rule: CONTROL_PLANES_RULE,
    description:
      "The control plane's URL: one address (a load balancer or VIP that checks `/readyz` works), or the replicas' URLs comma-separated, of which the agent starts at a random one and moves to the next when a link attempt fails or a link ends.",
  }),
  controlPlaneAddresses: optionalText(
    "KEELSON_CONTROL_PLANE_ADDRESSES",
    PINS_SETTING_RULE,
    "Pins: the address every connection to the control plane goes to for a host name of KEELSON_CONTROL_PLANE, instead of what DNS answers (the URL keeps the name, so TLS still verifies against it). Pins set later with `keelson configure-hosts` (controlPlaneHosts) are kept in the state dir and win over this.",
    checkPinsSetting,
  ),
  caHash: Type.Optional(
    Type.String({
      env: "KEELSON_CA_HASH",
      rule: "`sha256:<64 hex digits>`, or several comma-separated",
      check: (value: string) =>
        pinnedHashes(value).every((h) => CA_HASH_PATTERN.test(h))
          ? undefined
          : "must be sha256:<64 hex digits> (the join token's caCertHash), comma-separated if several",
      description:
        "The control plane's CA, pinned: the agent accepts its CA bundle only if the CA's public key has this hash (the join-token answer's `caCertHash`), keeps it in the state dir and trusts it alone.",
    }),
  ),
  joinToken: Type.Optional(
    Type.String({
      env: "KEELSON_JOIN_TOKEN",
      secret: true,
      rule: "text",
      description: "One-time join token, needed on the first start only.",
    }),
  ),
  stateDir: Type.Optional(
    Type.String({
      env: "KEELSON_STATE_DIR",
      rule: "a directory (created if missing)",
      defaultText: "systemd's `$STATE_DIRECTORY`, else `/var/lib/keelson-agent`",
      description: "Identity, credential, node state and installed versions (mode 0700).",
    }),
  ),
  mode: Type.Union([Type.Literal("host"), Type.Literal("in-cluster")], {
    env: "KEELSON_AGENT_MODE",
    default: "host",
    description:
      "`host`: the agent of a host (node phases, local API). `in-cluster`: the agent of an external cluster, run by its deployment YAML inside that cluster: it links to the control plane and reports the cluster's version, nodes and health read from the cluster's API, and touches no host.",
  }),
  serviceAccountDir: Type.String({
    env: "KEELSON_SERVICE_ACCOUNT_DIR",
    default: "/var/run/secrets/kubernetes.io/serviceaccount",
    rule: "a directory holding `token` and `ca.crt`",
    description:
      "In-cluster mode: the pod's service-account token and the cluster's CA, where Kubernetes mounts them (tests give their own).",
  }),
  kubernetesServiceHost: optionalText(
    "KUBERNETES_SERVICE_HOST",
    "a host name or IP address",
    "In-cluster mode: the cluster API's address, as Kubernetes sets it in every pod.",
  ),
  kubernetesServicePort: Type.Optional(
    Type.Integer({
      env: "KUBERNETES_SERVICE_PORT",
      minimum: 1,
      maximum: 65_535,
      description: "In-cluster mode: the cluster API's port, as Kubernetes sets it in every pod.",
    }),
  ),
  clusterReportMs: ms(
    "KEELSON_AGENT_CLUSTER_REPORT_MS",
    60_000,
    "In-cluster mode: how often the cluster's API is read and reported (also after every reconnect).",
  ),
  agentListen: Setting.listen("KEELSON_AGENT_LISTEN", "127.0.0.1:8082", "The host's local API."),
  nodePackage: Type.String({
    env: "KEELSON_NODE_PACKAGE",
    default: "/opt/keelson/node",
    rule: "a directory",
    description: "The host's own node package, for role versions the control plane stores no package of.",
  }),
  hostRoot: Type.String({
    env: "KEELSON_HOST_ROOT",
    default: "/",
    rule: "a directory",
    description: "Root under which node files are written (tests give each agent its own).",
  }),
  hostname: optionalText("KEELSON_HOSTNAME", "text", "The host name to report (default: the system's)."),
  primaryIp: optionalText(
    "KEELSON_PRIMARY_IP",
    "an IPv4 or IPv6 address",
    "The address to report (default: the address of the default route).",
    (value) => (isIP(value) ? undefined : "must be an IPv4 or IPv6 address"),
  ),
  cloudInstanceId: optionalText(
    "KEELSON_CLOUD_INSTANCE_ID",
    "letters, digits, `.`, `_`, `:` and `-`, at most 128",
    "The cloud's id of this machine, sent at registration: an auto deploy's user data sets it from the instance metadata (EC2's instance-id).",
    (value) =>
      /^[A-Za-z0-9._:-]{1,128}$/.test(value) ? undefined : "must be 1-128 letters, digits, '.', '_', ':' or '-'",
  ),
  httpsProxy: optionalText(
    "HTTPS_PROXY",
    PROXY_URL_RULE,
    "The proxy the agent's https:// and wss:// connections (the control plane, downloads) go through, with CONNECT, unless NO_PROXY names the host; the install script writes the one it ran with (an auto deploy's cluster httpProxy) into agent.env.",
    checkProxyUrl,
  ),
  httpProxy: optionalText(
    "HTTP_PROXY",
    PROXY_URL_RULE,
    "The proxy of the agent's http:// and ws:// connections, as HTTPS_PROXY.",
    checkProxyUrl,
  ),
  noProxy: optionalText(
    "NO_PROXY",
    "host names, domains (`.example.com`), IP addresses and CIDR blocks, each with an optional `:port`, comma-separated; `*` for all",
    "Hosts the agent reaches directly, not through HTTPS_PROXY or HTTP_PROXY (curl's rules: a name matches its subdomains too).",
  ),
  logLevel: Setting.logLevel(),
  reconnectMaxMs: ms(
    "KEELSON_AGENT_RECONNECT_MAX_MS",
    30_000,
    "Longest wait between link reconnects (backoff with jitter).",
  ),
  reconnectInitialMs: Type.Optional(
    Type.Integer({
      env: "KEELSON_AGENT_RECONNECT_INITIAL_MS",
      minimum: 1,
      unit: "milliseconds",
      defaultText: "`500` (or the maximum, if lower)",
      description: "First wait between link reconnects; at most KEELSON_AGENT_RECONNECT_MAX_MS.",
    }),
  ),
  factsIntervalMs: ms(
    "KEELSON_AGENT_FACTS_INTERVAL_MS",
    60_000,
    "How often host facts are collected (sent when changed).",
  ),
  upgradeTrialMs: ms(
    "KEELSON_AGENT_UPGRADE_TRIAL_MS",
    60_000,
    "How long a new agent version has to come up before rollback.",
  ),
  serviceManager: Type.Optional(
    Type.Union([Type.Literal("direct"), Type.Literal("systemd")], {
      env: "KEELSON_SERVICE_MANAGER",
      defaultText: "systemd when it runs, else direct",
      description: "How node services are run: systemd units, or child processes of the agent.",
    }),
  ),
  path: Type.String({
    env: "PATH",
    default: "/usr/sbin:/usr/bin:/sbin:/bin",
    rule: "directories, colon-separated",
    description:
      "Where node services and the phases' commands (etcd, openssl, ctr, node) are looked up; systemd gives the agent one.",
  }),
  nodeEnv: Setting.nodeEnv(),
  backupMinuteMs: ms(
    "KEELSON_BACKUP_MINUTE_MS",
    60_000,
    "Test knob: the length of a minute of the etcd backup schedule (intervals only).",
    10,
  ),
  procRoot: Type.String({
    env: "KEELSON_NODE_PROC_ROOT",
    default: "/proc",
    rule: "a directory",
    description: "Where the host checks read /proc.",
  }),
  sysRoot: Type.String({
    env: "KEELSON_NODE_SYS_ROOT",
    default: "/sys",
    rule: "a directory",
    description: "Where the host checks read /sys.",
  }),
  checkIntervalMs: ms(
    "KEELSON_NODE_CHECK_INTERVAL_MS",
    DEFAULT_RECONCILE.checkIntervalMs,
    "Between node status checks.",
  ),
  retryIntervalMs: ms("KEELSON_NODE_RETRY_INTERVAL_MS", DEFAULT_RECONCILE.retryIntervalMs, "First repair delay."),
  maxRetryIntervalMs: ms(
    "KEELSON_NODE_MAX_RETRY_INTERVAL_MS",
    DEFAULT_RECONCILE.maxRetryIntervalMs,
    "Longest repair delay.",
  ),
  retryBudget: Type.Integer({
    env: "KEELSON_NODE_RETRY_BUDGET",
    default: DEFAULT_RECONCILE.retryBudget,
    minimum: 0,
    description: "Failed repairs in a row before the node is failed (0: at once).",
  }),
  fullRestartEvery: Type.Integer({
    env: "KEELSON_NODE_FULL_RESTART_EVERY",
    default: DEFAULT_RECONCILE.fullRestartEvery,
    minimum: 0,
    description: "Every Nth repair restarts every phase (0: never).",
  }),
  failedRetryIntervalMs: ms(
    "KEELSON_NODE_FAILED_RETRY_INTERVAL_MS",
    DEFAULT_RECONCILE.failedRetryIntervalMs,
    "Repair pace once the budget is spent.",
  ),
  serviceStartMs: ms(
    "KEELSON_NODE_SERVICE_START_MS",
    DEFAULT_TIMEOUTS.serviceStartMs,
    "A started service's time to be healthy.",
  ),
  waitForServicesMs: ms(
    "KEELSON_NODE_WAIT_FOR_SERVICES_MS",
    DEFAULT_TIMEOUTS.waitForServicesMs,
    "The wait-for-services phase's limit.",
  ),
  commandMs: ms("KEELSON_NODE_COMMAND_MS", DEFAULT_TIMEOUTS.commandMs, "Limit of one command (openssl, etcdctl, ctr)."),
  serviceStopMs: ms("KEELSON_NODE_SERVICE_STOP_MS", DEFAULT_TIMEOUTS.serviceStopMs, "SIGTERM grace before SIGKILL."),
  regenerateCerts: Type.Boolean({
    env: "KEELSON_REGENERATE_CERTS",
    default: false,
    description: "Issue new node certificates at the next start instead of reusing valid ones.",
  }),
});

type Parsed = Static<typeof AgentSettingsSchema>;

export type AgentSettings = Readonly<
  Omit<Parsed, "controlPlane" | "controlPlaneAddresses" | "stateDir" | "reconnectInitialMs"> & {
    /** KEELSON_CONTROL_PLANE's URLs, trailing slashes removed (one, or the replicas'). */
    controlPlanes: readonly string[];
    /** KEELSON_CONTROL_PLANE_ADDRESSES, split (link/pins.ts); the state dir's kept pins win over them. */
    controlPlanePins: readonly ControlPlanePin[];
    stateDir: string;
    reconnectInitialMs: number;
    /** From `agentListen`, split once. */
    listen: { host: string; port: number };
    /** In-cluster mode's API (KUBERNETES_SERVICE_HOST/PORT, the service-account dir); undefined in host mode. */
    inCluster: InClusterApi | undefined;
  }
>;

function crossRules(s: Parsed): string | undefined {
  const stranger = s.controlPlaneAddresses
    ? strangerPin(parsePinsSetting(s.controlPlaneAddresses), splitControlPlanes(s.controlPlane))
    : undefined;
  if (stranger) return `KEELSON_CONTROL_PLANE_ADDRESSES: ${stranger}`;
  if (s.reconnectInitialMs !== undefined && s.reconnectInitialMs > s.reconnectMaxMs) {
    return "KEELSON_AGENT_RECONNECT_INITIAL_MS must not exceed KEELSON_AGENT_RECONNECT_MAX_MS";
  }
  if (s.mode === "in-cluster" && (s.kubernetesServiceHost === undefined || s.kubernetesServicePort === undefined)) {
    return "KEELSON_AGENT_MODE=in-cluster needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (Kubernetes sets them in every pod)";
  }
  return undefined;
}

/** Parses the agent's settings from the environment and flags; throws `SettingsError`. */
export function readAgentSettings(
  env: Record<string, string | undefined>,
  argv: readonly string[] = [],
): AgentSettings {
  const { controlPlane, controlPlaneAddresses, ...parsed } = parseSettings(AgentSettingsSchema, {
    env,
    argv,
    check: crossRules,
  });
  return Object.freeze({
    ...parsed,
    controlPlanes: Object.freeze(splitControlPlanes(controlPlane)),
    controlPlanePins: Object.freeze(controlPlaneAddresses ? parsePinsSetting(controlPlaneAddresses) : []),
    stateDir: stateDirOf(parsed.stateDir, env),
    nodePackage: resolve(parsed.nodePackage),
    hostRoot: resolve(parsed.hostRoot),
    reconnectInitialMs: parsed.reconnectInitialMs ?? Math.min(500, parsed.reconnectMaxMs),
    listen: parseListen(parsed.agentListen) as { host: string; port: number },
    inCluster:
      parsed.mode === "in-cluster" && parsed.kubernetesServiceHost && parsed.kubernetesServicePort
        ? {
            host: parsed.kubernetesServiceHost,
            port: parsed.kubernetesServicePort,
            serviceAccountDir: resolve(parsed.serviceAccountDir),
          }
        : undefined,
  });
}

const LAUNCHER_KEYS = ["stateDir", "logLevel", "upgradeTrialMs"] as const;
const LauncherSettingsSchema = Type.Object(
  Object.fromEntries(LAUNCHER_KEYS.map((key) => [key, AgentSettingsSchema.properties[key]])) as {
    [K in (typeof LAUNCHER_KEYS)[number]]: (typeof AgentSettingsSchema.properties)[K];
  } satisfies Record<string, TSchema>,
);

export type LauncherSettings = Readonly<{ stateDir: string; logLevel: Parsed["logLevel"]; upgradeTrialMs: number }>;

/**
 * The launcher's part of the same schema. It passes the command line on to the agent it runs
 * (maybe another version, with flags this one does not know), so other flags are that agent's to check.
 */
export function readLauncherSettings(
  env: Record<string, string | undefined>,
  argv: readonly string[] = [],
): LauncherSettings {
  const parsed = parseSettings(LauncherSettingsSchema, { env, argv, otherFlags: "ignore" });
  return Object.freeze({ ...parsed, stateDir: stateDirOf(parsed.stateDir, env) });
}

/**
 * systemd's StateDirectory= sets $STATE_DIRECTORY (a colon-separated list when several are
 * configured; the first is ours).
 */
function stateDirOf(explicit: string | undefined, env: Record<string, string | undefined>): string {
  const systemd = env.STATE_DIRECTORY?.split(":")[0]?.trim();
  return resolve(explicit ?? (systemd || "/var/lib/keelson-agent"));
}
