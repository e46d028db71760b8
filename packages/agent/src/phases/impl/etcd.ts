import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { urlHost } from "@keelson/protocol";
import { readTextOrUndefined, writeFileIfChanged } from "../../services/atomic-file.ts";
import { childPath } from "../../services/child-path.ts";
import { parseEnvFile, renderEnvFile } from "../../services/env-file.ts";
import type { ServiceSpec } from "../../services/types.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { configuredServiceEnv, definePhase, ensureService, expectServiceRunning } from "./common.ts";

/**
 * etcd on masters, the real binary from the node package, with mutual TLS on both the client
 * and the peer URLs (certificates from gen-certs), bound to the node's primary IP. The first
 * master bootstraps a new cluster; a further master is added as a member (`etcdctl member
 * add`, against the existing members) before it starts with initial-cluster-state existing.
 * Detach removes the member first, then wipes the data.
 */

export interface EtcdMember {
  id: string;
  status: string;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
}

export function etcdUrls(ctx: PhaseContext): { client: string; peer: string } {
  const ip = urlHost(ctx.config.primaryIp);
  return { client: `https://${ip}:${ctx.config.ports.etcdClient}`, peer: `https://${ip}:${ctx.config.ports.etcdPeer}` };
}

/** The etcd member name: the node id, unique in the cluster even when hostnames repeat. */
function memberName(ctx: PhaseContext): string {
  return ctx.config.nodeId;
}

export async function etcdctl(ctx: PhaseContext, endpoints: string[], args: string[], allowFailure = false) {
  const { paths } = ctx;
  return ctx.run(
    ctx.binary("etcdctl"),
    [
      `--endpoints=${endpoints.join(",")}`,
      `--cacert=${paths.caCert}`,
      `--cert=${paths.cert("etcd-client")}`,
      `--key=${paths.key("etcd-client")}`,
      "--dial-timeout=3s",
      "--command-timeout=5s",
      ...args,
    ],
    { env: { ETCDCTL_API: "3" }, allowFailure },
  );
}

/** `member list -w simple`: "id, status, name, peer urls, client urls, is learner". */
export function parseMemberList(text: string): EtcdMember[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [id = "", status = "", name = "", peers = "", clients = ""] = line.split(", ");
      const list = (s: string) =>
        s
          .split(",")
          .map((u) => u.trim())
          .filter(Boolean);
      return { id, status, name, peerUrls: list(peers), clientUrls: list(clients) };
    });
}

export async function memberList(ctx: PhaseContext, endpoints: string[]): Promise<EtcdMember[]> {
  const out = await etcdctl(ctx, endpoints, ["member", "list", "-w", "simple"]);
  return parseMemberList(out.stdout);
}

function timings(ctx: PhaseContext): { heartbeat: number; election: number } {
  const heartbeat = ctx.config.cluster.etcdHeartbeatIntervalMs ?? 100;
  const election = ctx.config.cluster.etcdElectionTimeoutMs ?? 1000;
  if (!Number.isInteger(heartbeat) || heartbeat < 10) {
    throw new PhaseError(`etcdHeartbeatIntervalMs ${heartbeat} is too small (at least 10 ms)`);
  }
  if (!Number.isInteger(election) || election < 5 * heartbeat || election > 50_000) {
    throw new PhaseError(
      `etcdElectionTimeoutMs ${election} must be at least 5 times etcdHeartbeatIntervalMs (${heartbeat}) and at most 50000`,
    );
  }
  return { heartbeat, election };
}

function renderEtcdEnv(ctx: PhaseContext, initialCluster: string, state: "new" | "existing"): string {
  const { paths, config } = ctx;
  const urls = etcdUrls(ctx);
  const { heartbeat, election } = timings(ctx);
  return renderEnvFile(
    {
      ETCD_NAME: memberName(ctx),
      ETCD_DATA_DIR: paths.etcdDataDir,
      ETCD_LISTEN_CLIENT_URLS: urls.client,
      ETCD_ADVERTISE_CLIENT_URLS: urls.client,
      ETCD_LISTEN_PEER_URLS: urls.peer,
      ETCD_INITIAL_ADVERTISE_PEER_URLS: urls.peer,
      ETCD_INITIAL_CLUSTER: initialCluster,
      ETCD_INITIAL_CLUSTER_STATE: state,
      ETCD_INITIAL_CLUSTER_TOKEN: `keelson-${config.clusterId}`,
      ETCD_HEARTBEAT_INTERVAL: heartbeat,
      ETCD_ELECTION_TIMEOUT: election,
      ETCD_CERT_FILE: paths.cert("etcd-server"),
      ETCD_KEY_FILE: paths.key("etcd-server"),
      ETCD_TRUSTED_CA_FILE: paths.caCert,
      ETCD_CLIENT_CERT_AUTH: "true",
      ETCD_PEER_CERT_FILE: paths.cert("etcd-peer"),
      ETCD_PEER_KEY_FILE: paths.key("etcd-peer"),
      ETCD_PEER_TRUSTED_CA_FILE: paths.caCert,
      ETCD_PEER_CLIENT_CERT_AUTH: "true",
      ETCD_LOGGER: "zap",
      ETCD_LOG_OUTPUTS: "stderr",
    },
    "Written by keelson-agent (configure-etcd). etcd reads ETCD_* variables as its flags.",
  );
}

/** Adds this master to the existing cluster unless an earlier attempt already did. */
async function joinExisting(ctx: PhaseContext): Promise<string> {
  const peers = ctx.config.etcdPeers;
  const ours = etcdUrls(ctx).peer;
  let members = await memberList(ctx, peers);
  if (!members.some((m) => m.peerUrls.includes(ours))) {
    ctx.log.info({ peers, peerUrl: ours }, "adding this master as an etcd member");
    await etcdctl(ctx, peers, ["member", "add", memberName(ctx), `--peer-urls=${ours}`]);
    members = await memberList(ctx, peers);
  }
  // A member added but never started has no name yet: that one is us.
  return members.map((m) => `${m.peerUrls.includes(ours) ? memberName(ctx) : m.name}=${m.peerUrls[0]}`).join(",");
}

export const configureEtcd = definePhase({
  id: "configure-etcd",
  async start(ctx) {
    const { paths } = ctx;
    mkdirSync(paths.etcdDataDir, { recursive: true, mode: 0o700 });
    const previous = parseEnvFile(readTextOrUndefined(paths.etcdEnv) ?? "");
    const hasData = existsSync(join(paths.etcdDataDir, "member"));
    let initialCluster: string;
    let state: "new" | "existing";
    let message: string;
    if (hasData && previous.ETCD_INITIAL_CLUSTER) {
      // etcd ignores the initial-* settings once it has data; keep what it was created with.
      initialCluster = previous.ETCD_INITIAL_CLUSTER;
      state = previous.ETCD_INITIAL_CLUSTER_STATE === "existing" ? "existing" : "new";
      message = "etcd data present: member already initialised";
    } else if (ctx.config.etcdPeers.length === 0) {
      initialCluster = `${memberName(ctx)}=${etcdUrls(ctx).peer}`;
      state = "new";
      message = "bootstrapping a new etcd cluster";
    } else {
      initialCluster = await joinExisting(ctx);
      state = "existing";
      message = `joining etcd cluster of ${initialCluster.split(",").length} member(s)`;
    }
    writeFileIfChanged(paths.etcdEnv, renderEtcdEnv(ctx, initialCluster, state), 0o600);
    return { message };
  },
  async stop(ctx) {
    if (ctx.intent === "detach") {
      rmSync(ctx.paths.etcdDataDir, { recursive: true, force: true });
      rmSync(ctx.paths.etcdEnv, { force: true });
      return { message: "etcd data removed" };
    }
    return undefined;
  },
  async status(ctx) {
    const text = readTextOrUndefined(ctx.paths.etcdEnv);
    if (text === undefined) throw new PhaseError(`${ctx.paths.etcdEnv} is missing`);
    const env = parseEnvFile(text);
    const state = env.ETCD_INITIAL_CLUSTER_STATE === "existing" ? "existing" : "new";
    if (renderEtcdEnv(ctx, env.ETCD_INITIAL_CLUSTER ?? "", state) !== text) {
      throw new PhaseError(`${ctx.paths.etcdEnv} differs from the node's configuration`);
    }
    return undefined;
  },
});

function etcdSpec(ctx: PhaseContext): ServiceSpec {
  const { paths } = ctx;
  const etcdctlPath = ctx.binary("etcdctl");
  return {
    name: "etcd",
    description: "etcd member",
    command: ctx.binary("etcd"),
    args: [],
    environmentFile: paths.etcdEnv,
    env: configuredServiceEnv(paths.etcdEnv),
    health: {
      kind: "exec",
      command: etcdctlPath,
      args: [
        `--endpoints=${etcdUrls(ctx).client}`,
        `--cacert=${paths.caCert}`,
        `--cert=${paths.cert("etcd-client")}`,
        `--key=${paths.key("etcd-client")}`,
        "--dial-timeout=2s",
        "--command-timeout=3s",
        "endpoint",
        "health",
      ],
      env: { ETCDCTL_API: "3", PATH: childPath() },
      timeoutMs: 6000,
    },
    stopTimeoutMs: ctx.config.timeouts.serviceStopMs,
  };
}

export const startEtcd = definePhase({
  id: "start-etcd",
  async start(ctx) {
    const status = await ensureService(ctx, etcdSpec(ctx), [ctx.config.ports.etcdClient, ctx.config.ports.etcdPeer]);
    return { message: `etcd healthy at ${etcdUrls(ctx).client} (pid ${status.pid})` };
  },
  async stop(ctx) {
    let message: string | undefined;
    if (ctx.intent === "detach") message = await leaveCluster(ctx);
    await ctx.services.stop("etcd");
    return message ? { message } : undefined;
  },
  async status(ctx) {
    await expectServiceRunning(ctx, "etcd");
    return undefined;
  },
});

/** Removes this member through another member, so the remaining cluster keeps quorum bookkeeping right. */
async function leaveCluster(ctx: PhaseContext): Promise<string> {
  const urls = etcdUrls(ctx);
  const endpoints = [...new Set([urls.client, ...ctx.config.etcdPeers])];
  let members: EtcdMember[];
  try {
    members = await memberList(ctx, endpoints);
  } catch (err) {
    throw new PhaseError(`cannot leave the etcd cluster: no member answers (${(err as Error).message})`);
  }
  const self = members.find((m) => m.peerUrls.includes(urls.peer));
  const others = members.filter((m) => m !== self);
  if (!self) return "not an etcd member (already removed)";
  if (others.length === 0) return "last etcd member: nothing to leave";
  const through = others.flatMap((m) => m.clientUrls);
  // etcd refuses a reconfiguration until its members have been connected for a few seconds
  // ("unhealthy cluster"), as right after a join: that passes, so wait it out (bounded).
  const deadline = Date.now() + 20_000;
  for (;;) {
    const out = await etcdctl(ctx, through.length > 0 ? through : endpoints, ["member", "remove", self.id], true);
    if (out.exitCode === 0) break;
    const output = `${out.stderr}${out.stdout}`;
    if (!/unhealthy cluster/.test(output) || Date.now() > deadline) {
      throw new PhaseError(
        `etcdctl member remove ${self.id} failed: ${output.trim().split("\n").slice(-3).join("\n")}`,
      );
    }
    await sleep(500, undefined, { signal: ctx.signal });
  }
  return `removed etcd member ${self.id}; ${others.length} member(s) remain`;
}
