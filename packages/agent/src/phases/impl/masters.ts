import { rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseIpv4, parseVrouterId, urlHost, VROUTER_ID_MAX, VROUTER_ID_MIN, vrrpRouterId } from "@keelson/protocol";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import { processStartTime } from "../../services/process-info.ts";
import type { ServiceSpec } from "../../services/types.ts";
import { CLUSTER_DOMAIN, type NodeConfig } from "../config.ts";
import type { NodePaths } from "../paths.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import {
  configuredServiceEnv,
  type DesiredFile,
  definePhase,
  ensureService,
  expectFiles,
  expectServiceRunning,
  hashOf,
  servicePhase,
  writeFiles,
} from "./common.ts";

/** Master-only phases at the top of the list: app catalog (deprecated), keepalived, coredns. */

const APP_CATALOG_NOTE = "deprecated: the app catalog is always disabled; this phase does nothing";

export const appCatalog = definePhase({
  id: "app-catalog",
  async start() {
    return { message: APP_CATALOG_NOTE };
  },
  async stop() {
    return { message: APP_CATALOG_NOTE };
  },
  async status() {
    return { message: APP_CATALOG_NOTE };
  },
});

interface Vip {
  address: string;
  iface: string;
  /** masterVipVrouterId as the API shows it (0–254). */
  apiId: number;
  /** What keepalived is given (VRRP's 1–255). */
  routerId: number;
}

function vipOf(ctx: PhaseContext): Vip | undefined {
  const c = ctx.config.cluster;
  if (!c.masterVipIpv4) return undefined;
  if (parseIpv4(c.masterVipIpv4) === undefined)
    throw new PhaseError(`masterVipIpv4 "${c.masterVipIpv4}" is not an IPv4 address`);
  if (!c.masterVipIface)
    throw new PhaseError("masterVipIpv4 is set but masterVipIface is not: keepalived needs the interface");
  const apiId = parseVrouterId(c.masterVipVrouterId);
  if (apiId === undefined) {
    throw new PhaseError(
      `masterVipVrouterId "${c.masterVipVrouterId ?? ""}" must be an integer from ${VROUTER_ID_MIN} to ${VROUTER_ID_MAX}`,
    );
  }
  return { address: c.masterVipIpv4, iface: c.masterVipIface, apiId, routerId: vrrpRouterId(apiId) };
}

export function renderKeepalivedConf(ctx: PhaseContext, vip: Vip): string {
  const { config } = ctx;
  // VRRP authentication takes at most 8 characters; derived from the cluster so masters agree.
  const pass = hashOf(config.clusterId).slice(0, 8);
  return [
    "# Written by keelson-agent (keepalived phase); local changes are overwritten.",
    "global_defs {",
    `  router_id keelson_${config.nodeId.replace(/[^A-Za-z0-9]/g, "").slice(0, 12)}`,
    "  enable_script_security",
    "}",
    "",
    "vrrp_instance keelson_api_vip {",
    "  state BACKUP",
    `  interface ${vip.iface}`,
    `  virtual_router_id ${vip.routerId}`,
    "  priority 100",
    "  advert_int 1",
    "  nopreempt",
    "  authentication {",
    "    auth_type PASS",
    `    auth_pass ${pass}`,
    "  }",
    "  virtual_ipaddress {",
    `    ${vip.address}/32 dev ${vip.iface}`,
    "  }",
    "}",
    "",
  ].join("\n");
}

function keepalivedSpec(ctx: PhaseContext): ServiceSpec {
  const { paths, config } = ctx;
  return {
    name: "keepalived",
    description: "keepalived (API server VIP)",
    command: ctx.binary("keepalived", { fallbackDirs: config.systemBinDirs }),
    args: [
      "--dont-fork",
      "--log-console",
      "--vrrp",
      `--use-file=${paths.keepalivedConf}`,
      `--pid=${join(paths.runDir, "keepalived-main.pid")}`,
      `--vrrp_pid=${vrrpPidFile(ctx)}`,
    ],
    env: configuredServiceEnv(paths.keepalivedConf),
    stopTimeoutMs: config.timeouts.serviceStopMs,
  };
}

/**
 * keepalived's own config test (`-t`, 2.2.7) before it runs: a started keepalived logs what it
 * refuses and carries on without the VIP, so a bad file would otherwise look like a healthy
 * service. The phase fails with keepalived's own words.
 */
async function testKeepalivedConf(ctx: PhaseContext): Promise<void> {
  const bin = ctx.binary("keepalived", { fallbackDirs: ctx.config.systemBinDirs });
  const result = await ctx.run(bin, ["--config-test", `--use-file=${ctx.paths.keepalivedConf}`], {
    allowFailure: true,
  });
  if (result.exitCode === 0) return;
  const said = `${result.stderr}\n${result.stdout}`.trim().replace(/\s*\n\s*/g, "; ");
  throw new PhaseError(
    `keepalived refuses ${ctx.paths.keepalivedConf} (keepalived -t exit ${result.exitCode}): ${said || "no output"}`,
  );
}

const NO_VIP = "masterVipIpv4 is not set: keepalived is not needed";

const vrrpPidFile = (ctx: PhaseContext) => join(ctx.paths.runDir, "keepalived-vrrp.pid");

/**
 * After keepalived stopped: its VRRP child may still be on its way out (the supervisor waits for
 * the parent), and a VIP it claimed while being stopped (a BACKUP turning MASTER mid-stop) can be
 * left on the interface, where this host would keep answering for an address another master now
 * holds. The child is waited for (its own pid file), then a VIP still shown is removed. Returns
 * whether one was.
 */
async function releaseLeftVip(ctx: PhaseContext, vip: Vip): Promise<boolean> {
  const pid = Number(readTextOrUndefined(vrrpPidFile(ctx))?.trim());
  const deadline = Date.now() + ctx.config.timeouts.serviceStopMs;
  while (processStartTime(pid) !== undefined && Date.now() < deadline) {
    await sleep(100, undefined, { signal: ctx.signal });
  }
  const ip = ctx.binary("ip", { fallbackDirs: ctx.config.systemBinDirs });
  const shown = await ctx.run(ip, ["-4", "-o", "addr", "show", "dev", vip.iface], { allowFailure: true });
  // No such interface (anymore): no address on it either.
  if (shown.exitCode !== 0 || !shown.stdout.includes(` ${vip.address}/32 `)) return false;
  await ctx.run(ip, ["addr", "del", `${vip.address}/32`, "dev", vip.iface]);
  return true;
}

export const keepalived = definePhase({
  id: "keepalived",
  async start(ctx) {
    const vip = vipOf(ctx);
    if (!vip) {
      await ctx.services.uninstall("keepalived");
      return { message: NO_VIP };
    }
    const conf = renderKeepalivedConf(ctx, vip);
    writeFiles([{ path: ctx.paths.keepalivedConf, content: conf }]);
    await testKeepalivedConf(ctx);
    const status = await ensureService(ctx, keepalivedSpec(ctx));
    return {
      message: `VIP ${vip.address} on ${vip.iface}, virtual router ${vip.routerId} (masterVipVrouterId ${vip.apiId}, pid ${status.pid})`,
    };
  },
  async stop(ctx) {
    await ctx.services.stop("keepalived");
    const vip = vipOf(ctx);
    const released = vip ? await releaseLeftVip(ctx, vip) : false;
    if (ctx.intent === "detach") rmSync(ctx.paths.keepalivedConf, { force: true });
    if (!vip) return { message: NO_VIP };
    return released ? { message: `removed VIP ${vip.address} that keepalived left on ${vip.iface}` } : undefined;
  },
  async status(ctx) {
    const vip = vipOf(ctx);
    if (!vip) return { message: NO_VIP };
    expectFiles([{ path: ctx.paths.keepalivedConf, content: renderKeepalivedConf(ctx, vip) }]);
    await expectServiceRunning(ctx, "keepalived");
    return undefined;
  },
});

/** The masters' Corefile: only directives and properties CoreDNS 1.11 knows (it refuses others). */
export function renderCorefile(config: NodeConfig, paths: NodePaths): DesiredFile {
  const ip = config.primaryIp;
  const host = urlHost(ip);
  return {
    path: paths.corefile,
    content: [
      "# Written by keelson-agent (coredns phase).",
      `.:${config.ports.corednsDns} {`,
      `    bind ${ip}`,
      "    errors",
      `    health ${host}:${config.ports.corednsHealth}`,
      `    ready ${host}:${config.ports.corednsReady}`,
      // kubeadm's Corefile has `prometheus :9153`; bound to this master's address like health
      // and ready, which is where the kube-dns Service's "metrics" port reaches it.
      `    prometheus ${host}:${config.ports.corednsMetrics}`,
      `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
      `        endpoint ${config.apiServerUrl}`,
      `        tls ${paths.cert("kubelet")} ${paths.key("kubelet")} ${paths.caCert}`,
      "        pods insecure",
      "        fallthrough in-addr.arpa ip6.arpa",
      "    }",
      "    forward . /etc/resolv.conf",
      "    cache 30",
      "    loop",
      "    reload",
      "}",
      "",
    ].join("\n"),
  };
}

export const coredns = servicePhase({
  id: "coredns",
  service: "coredns",
  files: (ctx) => [renderCorefile(ctx.config, ctx.paths)],
  spec: (ctx) => ({
    name: "coredns",
    description: "CoreDNS",
    command: ctx.binary("coredns"),
    args: ["-conf", ctx.paths.corefile],
    env: configuredServiceEnv(ctx.paths.corefile),
    health: { kind: "http", url: `http://${urlHost(ctx.config.primaryIp)}:${ctx.config.ports.corednsHealth}/health` },
    stopTimeoutMs: ctx.config.timeouts.serviceStopMs,
  }),
  ports: (ctx) => [
    ctx.config.ports.corednsHealth,
    ctx.config.ports.corednsReady,
    ctx.config.ports.corednsMetrics,
    ctx.config.ports.corednsDns,
  ],
  started: (_ctx, status) => `coredns pid ${status.pid}`,
});
