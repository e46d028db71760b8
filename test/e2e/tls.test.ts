import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { type ConnectionOptions, connect, createServer as createTlsServer, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfSignedCa } from "../../packages/control-plane/src/pki/cluster-ca.ts";
import { generateKeyPair, privateKeyToPem } from "../../packages/control-plane/src/pki/keys.ts";
import { signCertificate } from "../../packages/control-plane/src/pki/sign.ts";
import { caCertHash } from "../../packages/protocol/src/ca-hash.ts";
import { type AgentProc, startAgent } from "./support/agents.ts";
import { issueJoinToken, joinTokenUsedAt } from "./support/join-tokens.ts";
import {
  api,
  freePort,
  logRecords,
  type Proc,
  type ServerProc,
  start,
  startServer,
  tempDir,
  trustedFetch,
  waitUntil,
} from "./support/processes.ts";

/**
 * keelson-server with KEELSON_TLS=auto and real agents pinned to its CA by hash: HTTPS with a
 * certificate that chains to the CA in the data dir, TLS 1.1 refused, HSTS, a renewal of the
 * server certificate under a live link, a wrong hash refused before the join token is spent,
 * and a man in the middle with a CA of its own refused on reconnect.
 */

const ADMIN = "e2e-admin-token";

/** The peer certificate a TLS client sees at `port`, checked against `ca`. */
function handshake(port: number, options: ConnectionOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, ...options }, () => resolve(socket));
    socket.once("error", reject);
  });
}

/**
 * Between agent and control plane: a TCP pass-through, until `impersonate()` makes it a man in
 * the middle: it answers TLS itself with a certificate for 127.0.0.1 from a CA of its own and
 * forwards what it decrypted to the control plane over TLS, so an agent that did not check the
 * chain would link through it. Every switch cuts the connections open, so the agent
 * reconnects through the new behaviour.
 */
async function startMiddle(target: number, realCa: string) {
  const port = await freePort();
  const sockets = new Set<Socket>();
  const clientErrors: string[] = [];
  const ca = await createSelfSignedCa([{ CN: ["not-keelson-ca"] }]);
  const keys = await generateKeyPair();
  const { certPem } = await signCertificate(ca, {
    publicKey: keys.publicKey,
    subject: { commonName: "127.0.0.1" },
    ipAddresses: ["127.0.0.1"],
    usages: ["server"],
    validHours: 1,
  });
  let intercepted = 0;
  const impostor = createTlsServer({ key: await privateKeyToPem(keys.privateKey), cert: certPem }, (decrypted) => {
    intercepted++;
    const upstream = connect({ host: "127.0.0.1", port: target, ca: realCa });
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => decrypted.destroy());
    decrypted.on("error", () => upstream.destroy());
    decrypted.pipe(upstream).pipe(decrypted);
  });
  impostor.on("tlsClientError", (err) => clientErrors.push(err.message));
  let impersonating = false;
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => undefined);
    if (impersonating) {
      impostor.emit("connection", client);
      return;
    }
    const upstream = createConnection({ host: "127.0.0.1", port: target });
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const cutAll = () => {
    for (const s of sockets) s.resetAndDestroy();
  };
  return {
    url: `https://127.0.0.1:${port}`,
    clientErrors,
    /** Connections the impostor completed a handshake on (a client may still drop it after). */
    intercepted: () => intercepted,
    impersonate(on: boolean) {
      impersonating = on;
      cutAll();
    },
    close: () =>
      new Promise<void>((resolve) => {
        cutAll();
        server.close(() => resolve());
      }),
  };
}

describe("TLS by default, with pinned trust", () => {
  let server: ServerProc;
  let projectId: string;
  let caPem: string;
  let doFetch: typeof fetch;
  const procs: Proc[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  const joinToken = () => issueJoinToken(server, projectId, doFetch);
  const nodeOf = async (name: string) => {
    const res = await api<{ name: string; agentConnected: boolean }[]>(`${server.url}/v4/${projectId}/nodes`, ADMIN, {
      fetch: doFetch,
    });
    return res.body.find((n) => n.name === name);
  };
  const linkLost = (agent: AgentProc) => logRecords(agent).filter((r) => r.msg === "link to the control plane lost");

  beforeAll(async () => {
    server = await startServer({
      https: true,
      // 18 s: renewed at about 12 s, checked every 1.8 s, so a test sees it happen.
      env: { KEELSON_TLS: "auto", KEELSON_TLS_CERT_VALID_HOURS: "0.005", KEELSON_LOG_LEVEL: "info" },
    });
    procs.push(server);
    caPem = readFileSync(join(server.dataDir, "tls", "ca.crt"), "utf8");
    doFetch = trustedFetch(server.dataDir);
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN, {
      fetch: doFetch,
    });
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  });
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop("SIGKILL");
    for (const c of cleanups) await c();
  });

  it("serves HTTPS with a certificate chaining to the CA in its data dir, HSTS, and no TLS below 1.2", async () => {
    const port = Number(new URL(server.url).port);
    const socket = await handshake(port, { ca: caPem });
    expect(socket.authorized).toBe(true);
    const leaf = socket.getPeerX509Certificate();
    socket.destroy();
    expect(leaf?.checkIP("127.0.0.1")).toBe("127.0.0.1");
    const leafFile = join(tempDir("keelson-e2e-tls-"), "leaf.pem");
    execFileSync("sh", ["-c", `cat > ${leafFile}`], { input: leaf?.toString() });
    expect(
      execFileSync("openssl", ["verify", "-CAfile", join(server.dataDir, "tls", "ca.crt"), leafFile]).toString(),
    ).toMatch(/: OK/);

    // Without the CA, a client refuses the server (it is no public CA's).
    await expect(handshake(port, {})).rejects.toThrow(/self-signed|unable to verify|issuer/i);
    // A client that would speak TLS 1.1 (its own security level lowered) is refused by the server.
    await expect(
      handshake(port, { ca: caPem, minVersion: "TLSv1.1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" }),
    ).rejects.toThrow(/protocol version|unsupported protocol/i);

    const health = await api(`${server.url}/healthz`, "", { fetch: doFetch });
    expect(health.status).toBe(200);
    expect(health.headers.get("strict-transport-security")).toMatch(/^max-age=\d+/);
    const bundle = await doFetch(`${server.url}/v1/ca`);
    expect(await bundle.text()).toBe(caPem);
    expect((await joinToken()).caCertHash).toBe(caCertHash(caPem));
  });

  it("refuses plain HTTP on a non-loopback listener at start, naming what to set", async () => {
    const proc = start("npx", ["--no-install", "keelson-server"], {
      KEELSON_LISTEN: `0.0.0.0:${await freePort()}`,
      KEELSON_TLS: "off",
      KEELSON_DATA_DIR: tempDir("keelson-e2e-insecure-"),
    });
    procs.push(proc);
    expect(await proc.exited).toBe(78);
    expect(proc.output()).toMatch(/KEELSON_TLS=auto/);
    expect(proc.output()).toMatch(/KEELSON_INSECURE_HTTP=true/);
  });

  it("an agent with a wrong hash refuses before spending its join token; the right hash links over TLS and stays linked across a renewal", async () => {
    const issued = await joinToken();
    const wrongHash = caCertHash((await createSelfSignedCa([{ CN: ["other"] }])).certPem);
    const wrong = await startAgent({
      name: "tls-wrong",
      controlPlane: server.url,
      joinToken: issued.token,
      env: { KEELSON_CA_HASH: wrongHash },
    });
    procs.push(wrong);
    expect(await wrong.exited).toBe(78);
    const fatal = logRecords(wrong).find((r) => r.level === 60);
    expect(String(fatal?.msg)).toContain(`not KEELSON_CA_HASH ${wrongHash}`);
    expect(await joinTokenUsedAt(server, projectId, issued.id, doFetch)).toBeNull();

    // The same token, now with the hash of the answer: registers, links, and keeps the CA.
    const right = await startAgent({
      name: "tls-right",
      controlPlane: server.url,
      joinToken: issued.token,
      env: { KEELSON_CA_HASH: issued.caCertHash as string },
    });
    procs.push(right);
    await waitUntil("the pinned agent linked", async () => (await nodeOf("tls-right"))?.agentConnected, 60_000);
    expect(readFileSync(join(right.stateDir, "control-plane-ca.pem"), "utf8").trim()).toBe(caPem.trim());

    // The server certificate is renewed (a new serial) while the link stays up.
    const port = Number(new URL(server.url).port);
    const serialOf = async () => {
      const s = await handshake(port, { ca: caPem });
      const serial = s.getPeerX509Certificate()?.serialNumber;
      s.destroy();
      return serial;
    };
    const first = await serialOf();
    await waitUntil("the server certificate renewed", async () => (await serialOf()) !== first, 40_000, 500);
    // The log line is written just after the new context is set and reaches us through a pipe: wait for it.
    await waitUntil(
      "the renewal logged",
      async () => logRecords(server).some((r) => r.msg === "server certificate renewed"),
      5_000,
      100,
    );
    expect((await nodeOf("tls-right"))?.agentConnected).toBe(true);
    expect(linkLost(right)).toEqual([]);
  });

  it("a server presenting a certificate from another CA is refused on reconnect", async () => {
    const middle = await startMiddle(Number(new URL(server.url).port), caPem);
    cleanups.push(middle.close);
    const issued = await joinToken();
    const agent = await startAgent({
      name: "tls-middle",
      controlPlane: middle.url,
      joinToken: issued.token,
      env: { KEELSON_CA_HASH: issued.caCertHash as string },
    });
    procs.push(agent);
    await waitUntil(
      "the agent linked through the pass-through",
      async () => (await nodeOf("tls-middle"))?.agentConnected,
      60_000,
    );

    middle.impersonate(true);
    // Node's TLS client checks the chain once the handshake is through and then drops the
    // socket, so the impostor sees a hang-up, and the agent says why in its log.
    const certificateRefusals = () =>
      logRecords(agent).filter((r) => r.msg === "the control plane's certificate is not trusted; not linking");
    await waitUntil(
      "the agent refused the impostor's certificate twice",
      async () => certificateRefusals().length >= 2,
      30_000,
    );
    expect(middle.clientErrors.length + middle.intercepted()).toBeGreaterThanOrEqual(2);
    expect((await nodeOf("tls-middle"))?.agentConnected).toBe(false);
    expect(agent.child.exitCode).toBeNull();

    // The real control plane again: the agent links again with the same trust.
    middle.impersonate(false);
    await waitUntil("the agent linked again", async () => (await nodeOf("tls-middle"))?.agentConnected, 60_000);
  });
});
