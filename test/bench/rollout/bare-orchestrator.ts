/**
 * The rollout benchmark's baseline: the same rolling restart driven by a bare `ws` server
 * speaking the agent protocol to the same simulated fleet, with nothing else (no registration,
 * authentication, database, operation records, cursor writes or logging). It sends
 * `node.restart` to the master, then to workers `percent` at a time, each batch when every node
 * of the previous one has reported `converging` and then `ok`, exactly the rule keelson-server
 * follows. Its makespan is the simulators' own (phase time, timer slack, WebSocket round
 * trips); what keelson-server takes beyond it is the control plane's overhead.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { PROTOCOL_VERSION, type WebSocket, WebSocketServer } from "../../sim/deps.ts";

const port = Number(process.env.PORT);
const CLUSTER = "bare-cluster";

interface Host {
  ws: WebSocket;
  status: string;
  /** Resolves when the node reports `ok` after having reported something else. */
  waiter?: { sawOther: boolean; resolve: () => void };
}

const server = createServer();
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
const hosts = new Map<string, Host>();

server.on("upgrade", (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    let hostId = "";
    ws.on("message", (data) => {
      const frame = JSON.parse(String(data)) as {
        type: string;
        hostId?: string;
        report?: { status: string };
      };
      if (frame.type === "hello" && frame.hostId) {
        hostId = frame.hostId;
        hosts.set(hostId, { ws, status: "ok" });
        ws.send(
          JSON.stringify({
            type: "welcome",
            protocolVersion: PROTOCOL_VERSION,
            hostId,
            projectId: "bare",
            heartbeatMs: 60_000,
          }),
        );
      } else if (frame.type === "node.report" && frame.report) {
        const host = hosts.get(hostId);
        if (!host) return;
        host.status = frame.report.status;
        const waiter = host.waiter;
        if (!waiter) return;
        if (host.status !== "ok") waiter.sawOther = true;
        else if (waiter.sawOther) {
          host.waiter = undefined;
          waiter.resolve();
        }
      }
    });
  });
});

/** Sends a command and resolves once the node went through something else back to `ok`. */
function roll(hostId: string, name: string, payload: object): Promise<void> {
  const host = hosts.get(hostId);
  if (!host) throw new Error(`host ${hostId} is not connected`);
  const done = new Promise<void>((resolve) => {
    host.waiter = { sawOther: false, resolve };
  });
  host.ws.send(JSON.stringify({ type: "command", id: randomUUID(), name, payload, timeoutMs: 600_000 }));
  return done;
}

function joinPayload(role: "master" | "worker") {
  return {
    clusterId: CLUSTER,
    clusterName: "bare",
    role,
    kubeRoleVersion: "1.30.6-kls.1",
    settings: {},
    masterVipVrouterId: "",
    caCertPem: "-----BEGIN CERTIFICATE-----\nbare\n-----END CERTIFICATE-----\n",
    apiEndpoint: "https://127.0.0.1:443",
    etcdMembers: [],
  };
}

async function restartAll(percent: number): Promise<{ makespanMs: number; batches: number }> {
  const [master, ...workers] = [...hosts.keys()].sort();
  if (!master) throw new Error("no hosts");
  // Membership first (not measured), as the keelson run has its cluster before it restarts.
  await Promise.all([
    roll(master, "node.join", joinPayload("master")),
    ...workers.map((id) => roll(id, "node.join", joinPayload("worker"))),
  ]);
  const size = Math.max(1, Math.floor((workers.length * percent) / 100));
  const restart = { clusterId: CLUSTER, regenerateCerts: false };
  const t0 = performance.now();
  await roll(master, "node.restart", restart);
  let batches = 0;
  for (let i = 0; i < workers.length; i += size) {
    await Promise.all(workers.slice(i, i + size).map((id) => roll(id, "node.restart", restart)));
    batches++;
  }
  return { makespanMs: Math.round(performance.now() - t0), batches };
}

process.on("message", async (message: { type: string; percent?: number; count?: number }) => {
  try {
    if (message.type === "roll") {
      process.send?.({ type: "rolled", ...(await restartAll(message.percent ?? 10)) });
    } else if (message.type === "stop") {
      for (const { ws } of hosts.values()) ws.close(1001, "baseline stopping");
      server.close();
      process.send?.({ type: "stopped" });
      process.disconnect();
      setTimeout(() => process.exit(0), 500).unref();
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});

server.listen(port, "127.0.0.1", () => process.send?.({ type: "listening" }));
