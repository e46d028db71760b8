import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issue, kubeconfig, makeCa, type PemPair } from "../support/kube-pki.ts";

/**
 * The stand-in kube-apiserver (test/fixtures/node-package) against the real kubectl: discovery,
 * objects, and the authentication, authorization and admission it was started with. Run alone
 * (objects in memory, no etcd), with a token-review webhook played by this test.
 */

const FIXTURE = join(import.meta.dirname, "..", "fixtures", "node-package");
const HOST = "127.0.0.1";
const dir = mkdtempSync(join(tmpdir(), "keelson-apiserver-"));
const ca = makeCa(join(dir, "ca"));
const cert = (cn: string, groups: string[] = [], expired = false) =>
  issue(join(dir, "certs"), ca, { cn, groups, expired });

const WEBHOOK_USERS: Record<string, { username: string; groups: string[] }> = {
  "admin-token": { username: "alice", groups: ["keelson:cluster-admins"] },
  "plain-token": { username: "bob", groups: [] },
};

const apiservers: ChildProcess[] = [];
let webhook: https.Server | undefined;
let server = "";
let output = "";
/** The flags every stand-in of this file starts with (written in beforeAll). */
let baseFlags: string[] = [];

/** The real kubectl, asynchronously: the token webhook it ends up asking lives in this process. */
function kubectl(name: string, user: { token: string } | PemPair, args: string[]) {
  const file = join(dir, `${name}.kubeconfig`);
  writeFileSync(file, kubeconfig(server, ca.cert, "token" in user ? user : { cert: user.cert, key: user.key }));
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      "kubectl",
      ["--kubeconfig", file, "--cache-dir", join(dir, "cache"), ...args],
      { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH ?? "", HOME: dir } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** One raw request with a client certificate or a bearer token, for the exact Status body. */
function raw(user: PemPair | { token: string }, method: string, path: string, body?: unknown) {
  return rawAt(server, user, method, path, body);
}

function rawAt(base: string, user: PemPair | { token: string }, method: string, path: string, body?: unknown) {
  const type = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  const who =
    "token" in user ? { headers: { authorization: `Bearer ${user.token}` } } : { cert: user.cert, key: user.key };
  const payload = body === undefined ? undefined : JSON.stringify(body);
  // Node sends a DELETE's body without a length unless told: say it, as kubectl does.
  const length = payload === undefined ? {} : { "content-length": Buffer.byteLength(payload) };
  return new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    const req = https.request(
      `${base}${path}`,
      { method, ca: ca.cert, ...who, headers: { "content-type": type, ...length, ...who.headers } },
      (res) => {
        let text = "";
        res.on("data", (c) => {
          text += c;
        });
        res.on("end", () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
          } catch {
            reject(new Error(`${method} ${path}: ${res.statusCode} is no JSON: ${JSON.stringify(text)}`));
          }
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** A JWT's header (0) or claims (1), decoded. */
function jwtPart(token: string, index: 0 | 1) {
  return JSON.parse(Buffer.from(token.split(".")[index] ?? "", "base64url").toString("utf8"));
}

/** An answer with the real Status body (code, reason, message, details). */
function statusAnswer(code: number, reason: string, message: string, details?: Record<string, unknown>) {
  const body = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason };
  return { status: code, body: { ...body, ...(details ? { details } : {}), code } };
}

/** The answer a refusal gets: 403 with the real Forbidden Status. */
function forbidden(message: string, details: Record<string, string>) {
  return statusAnswer(403, "Forbidden", message, details);
}

const masters = () => cert("keelson-bootstrap", ["system:masters"]);
const admin = () => cert("alice", ["keelson:cluster-admins"]);

beforeAll(async () => {
  const tls = issue(join(dir, "certs"), ca, { cn: "kube-apiserver", ips: [HOST] });
  const files = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };
  const saKey = execFileSync("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], {
    encoding: "utf8",
  });
  const saPub = execFileSync("openssl", ["pkey", "-pubout"], { input: saKey, encoding: "utf8" });

  webhook = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    let text = "";
    req.on("data", (c) => {
      text += c;
    });
    req.on("end", () => {
      const user = WEBHOOK_USERS[(JSON.parse(text) as { spec: { token: string } }).spec.token];
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          kind: "TokenReview",
          status: user ? { authenticated: true, user } : { authenticated: false },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => webhook?.listen(0, HOST, resolve));
  const webhookPort = (webhook.address() as AddressInfo).port;
  const webhookConfig = files(
    "webhook.kubeconfig",
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "w",
          cluster: { server: `https://${HOST}:${webhookPort}/authenticate`, "certificate-authority": ca.certFile },
        },
      ],
      users: [{ name: "apiserver", user: {} }],
      contexts: [{ name: "w", context: { cluster: "w", user: "apiserver" } }],
      "current-context": "w",
    }),
  );
  baseFlags = [
    `--tls-cert-file=${files("apiserver.crt", tls.cert)}`,
    `--tls-private-key-file=${files("apiserver.key", tls.key)}`,
    `--client-ca-file=${ca.certFile}`,
    `--authentication-token-webhook-config-file=${webhookConfig}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-signing-key-file=${files("sa.key", saKey)}`,
    `--service-account-key-file=${files("sa.pub", saPub)}`,
    "--authorization-mode=Node,RBAC",
    "--enable-admission-plugins=NodeRestriction",
    "--service-cluster-ip-range=10.96.0.0/16",
  ];
  server = await startApiserver([]);
}, 60_000);

/** A stand-in on a free loopback port with the base flags and `extra`; its URL once /version answers. */
async function startApiserver(extra: string[]): Promise<string> {
  const port = await new Promise<number>((resolve) => {
    const probe = https.createServer().listen(0, HOST, () => {
      const p = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const url = `https://${HOST}:${port}`;
  const child = spawn(
    join(FIXTURE, "bin", "kube-apiserver"),
    [`--bind-address=${HOST}`, `--secure-port=${port}`, ...baseFlags, ...extra],
    { env: { PATH: process.env.PATH ?? "", KEELSON_NODE_BIN: process.execPath }, stdio: ["ignore", "pipe", "pipe"] },
  );
  apiservers.push(child);
  child.stderr?.on("data", (c) => {
    output += c;
  });
  for (let i = 0; i < 100; i++) {
    const up = await rawAt(url, masters(), "GET", "/version").catch(() => undefined);
    if (up?.status === 200) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the stand-in apiserver did not come up:\n${output}`);
}

afterAll(async () => {
  for (const child of apiservers) child.kill("SIGTERM");
  await new Promise<void>((resolve) => webhook?.close(() => resolve()) ?? resolve());
  rmSync(dir, { recursive: true, force: true });
});

describe("the stand-in kube-apiserver under the real kubectl", () => {
  it("answers /readyz and discovery to any authenticated user; a subject without a binding gets the real 403", async () => {
    const bob = cert("bob");
    expect((await kubectl("bob", bob, ["get", "--raw", "/readyz"])).stdout).toBe("ok");
    expect((await kubectl("bob", bob, ["api-resources", "--api-group="])).stdout).toMatch(
      /^nodes\s+no\s+v1\s+false\s+Node$/m,
    );
    const listed = await kubectl("bob", bob, ["get", "nodes", "-o", "json"]);
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(
      'Error from server (Forbidden): nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope',
    );
    expect(await raw(bob, "GET", "/api/v1/nodes")).toEqual(
      forbidden('nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope', {
        kind: "nodes",
      }),
    );
  });

  it("a ClusterRoleBinding to cluster-admin lets the group in, by certificate and by webhook token", async () => {
    expect((await kubectl("alice", admin(), ["get", "nodes"])).code).toBe(1);
    const bound = await kubectl("masters", masters(), [
      "create",
      "clusterrolebinding",
      "keelson-cluster-admins",
      "--clusterrole=cluster-admin",
      "--group=keelson:cluster-admins",
    ]);
    expect(bound.stderr).toBe("");
    expect(bound.stdout).toContain("clusterrolebinding.rbac.authorization.k8s.io/keelson-cluster-admins created");
    expect((await kubectl("alice", admin(), ["get", "nodes", "-o", "json"])).stdout).toContain('"kind": "List"');
    expect((await kubectl("alice-token", { token: "admin-token" }, ["get", "nodes", "-o", "json"])).code).toBe(0);
    const bob = await kubectl("bob-token", { token: "plain-token" }, ["get", "nodes"]);
    expect(bob.stderr).toContain('User "bob" cannot list resource "nodes"');
  });

  it("a forged token and an expired certificate are 401, even on /readyz", async () => {
    for (const [name, user] of [
      ["forged", { token: "kct_forged" }],
      ["expired", cert("alice", ["keelson:cluster-admins"], true)],
    ] as const) {
      for (const args of [
        ["get", "nodes"],
        ["get", "--raw", "/readyz"],
      ]) {
        const r = await kubectl(name, user, args);
        expect(r.code, `${name} ${args.join(" ")}`).toBe(1);
        expect(r.stderr, `${name} ${args.join(" ")}`).toMatch(/Unauthorized/);
      }
    }
  });

  it("Node authorization with NodeRestriction: a kubelet registers and changes its own Node only", async () => {
    const n1 = cert("system:node:n1", ["system:nodes"]);
    const node = (name: string) => ({ apiVersion: "v1", kind: "Node", metadata: { name } });
    expect((await raw(n1, "POST", "/api/v1/nodes", node("n1"))).status).toBe(201);
    const other = await raw(n1, "POST", "/api/v1/nodes", node("n2"));
    expect(other.status).toBe(403);
    expect(other.body.message).toBe('nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"');
    expect((await raw(masters(), "POST", "/api/v1/nodes", node("n2"))).status).toBe(201);
    const patched = await raw(n1, "DELETE", "/api/v1/nodes/n2");
    expect(patched.body.reason).toBe("Forbidden");
    // The scheduler's default role reads nodes; it grants no RBAC writes.
    const scheduler = cert("system:kube-scheduler");
    expect((await raw(scheduler, "GET", "/api/v1/nodes")).status).toBe(200);
    expect((await raw(scheduler, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {})).status).toBe(
      403,
    );
    // A kubelet may read nodes but not RBAC objects.
    expect((await raw(n1, "GET", "/api/v1/nodes/n2")).status).toBe(200);
    expect((await raw(n1, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings")).status).toBe(403);
    const listed = JSON.parse((await kubectl("alice", admin(), ["get", "nodes", "-o", "json"])).stdout) as {
      items: { metadata: { name: string } }[];
    };
    expect(listed.items.map((n) => n.metadata.name).sort()).toEqual(["n1", "n2"]);
    // kubectl's plain `get` prints the server's Table: the real node columns.
    const printed = (await kubectl("alice", admin(), ["get", "nodes"])).stdout.split("\n");
    expect(printed[0]).toMatch(/^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION$/);
    expect(printed[1]).toMatch(/^n1\s+Unknown\s+<none>\s+\d+s\s*$/);
  });

  it("NodeRestriction: a kubelet sets no node-role label, changes no taint after registering, and may not delete its Node", async () => {
    const n3 = cert("system:node:n3", ["system:nodes"]);
    const path = "/api/v1/nodes/n3";
    const refused = (message: string) => forbidden(message, { name: "n3", kind: "nodes" });
    const withRole = {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "n3", labels: { "node-role.kubernetes.io/worker": "" } },
    };
    expect(await raw(n3, "POST", "/api/v1/nodes", withRole)).toEqual(
      refused(
        'nodes "n3" is forbidden: node "n3" is not allowed to set the following labels: node-role.kubernetes.io/worker',
      ),
    );
    // What a kubelet may register with: labels outside kubernetes.io (and its own set), and taints.
    const taint = { key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" };
    const registered = await raw(n3, "POST", "/api/v1/nodes", {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "n3", labels: { "keelson.io/cluster": "c1", "kubernetes.io/hostname": "n3" } },
      spec: { taints: [taint] },
    });
    expect(registered.status).toBe(201);
    expect((await raw(n3, "PATCH", path, { metadata: { labels: { "keelson.io/node": "x" } } })).status).toBe(200);
    expect((await raw(n3, "PATCH", path, { spec: { unschedulable: true } })).status).toBe(200);
    expect(
      await raw(n3, "PATCH", path, {
        metadata: { labels: { "node-role.kubernetes.io/master": "", "node-restriction.kubernetes.io/x": "1" } },
      }),
    ).toEqual(
      refused(
        'nodes "n3" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x, node-role.kubernetes.io/master',
      ),
    );
    expect(await raw(n3, "PATCH", path, { spec: { taints: [] } })).toEqual(
      refused('nodes "n3" is forbidden: node "n3" is not allowed to modify taints'),
    );
    expect(await raw(n3, "DELETE", path)).toEqual(
      refused(
        'nodes "n3" is forbidden: User "system:node:n3" cannot delete resource "nodes" in API group "" at the cluster scope',
      ),
    );
    // Nothing the refusals asked for happened; an identity outside system:nodes may do all three.
    const kept = (await raw(masters(), "GET", path)).body as {
      metadata: { labels: Record<string, string> };
      spec: { taints: unknown[] };
    };
    expect(kept.metadata.labels).toEqual({
      "keelson.io/cluster": "c1",
      "keelson.io/node": "x",
      "kubernetes.io/hostname": "n3",
    });
    expect(kept.spec.taints).toEqual([taint]);
    const relabel = { metadata: { labels: { "node-role.kubernetes.io/master": "" } }, spec: { taints: [] } };
    expect((await raw(masters(), "PATCH", path, relabel)).status).toBe(200);
    expect((await raw(masters(), "DELETE", path)).status).toBe(200);
  });

  it("Node authorizer and NodeRestriction beyond Nodes: its own Lease, mirror pods bound to itself, secrets its pods use", async () => {
    const n5 = cert("system:node:n5", ["system:nodes"]);
    const node = (name: string) => ({ apiVersion: "v1", kind: "Node", metadata: { name } });
    expect((await raw(n5, "POST", "/api/v1/nodes", node("n5"))).status).toBe(201);
    expect((await raw(masters(), "POST", "/api/v1/nodes", node("n6"))).status).toBe(201);
    // Nodes: only its own.
    expect(await raw(n5, "PATCH", "/api/v1/nodes/n6", { metadata: { labels: { a: "b" } } })).toEqual(
      forbidden('nodes "n6" is forbidden: node "n5" is not allowed to modify node "n6"', { name: "n6", kind: "nodes" }),
    );
    expect((await raw(n5, "PATCH", "/api/v1/nodes/n5", { metadata: { labels: { a: "b" } } })).status).toBe(200);

    // Leases: only its own, only in kube-node-lease.
    const LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    const lease = (name: string) => ({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name },
      spec: { holderIdentity: name, leaseDurationSeconds: 40 },
    });
    const leaseDetails = (name?: string) => ({
      ...(name ? { name } : {}),
      group: "coordination.k8s.io",
      kind: "leases",
    });
    expect((await raw(n5, "POST", LEASES, lease("n5"))).status).toBe(201);
    expect(await raw(n5, "POST", LEASES, lease("n6"))).toEqual(
      forbidden(
        'leases.coordination.k8s.io "n6" is forbidden: can only access node lease with the same name as the requesting node',
        leaseDetails("n6"),
      ),
    );
    expect((await raw(masters(), "POST", LEASES, lease("n6"))).status).toBe(201);
    const who = 'User "system:node:n5"';
    for (const [method, verb] of [
      ["GET", "get"],
      ["PUT", "update"],
      ["DELETE", "delete"],
    ] as const) {
      expect(await raw(n5, method, `${LEASES}/n6`, method === "PUT" ? lease("n6") : undefined)).toEqual(
        forbidden(
          `leases.coordination.k8s.io "n6" is forbidden: ${who} cannot ${verb} resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`,
          leaseDetails("n6"),
        ),
      );
    }
    const own = await raw(n5, "GET", `${LEASES}/n5`);
    expect(own.status).toBe(200);
    const renewed = { ...own.body, spec: { holderIdentity: "n5", renewTime: "2026-11-26T11:00:00.000000Z" } };
    expect((await raw(n5, "PUT", `${LEASES}/n5`, renewed)).status).toBe(200);
    expect(await raw(n5, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease("n5"))).toEqual(
      forbidden(
        `leases.coordination.k8s.io is forbidden: ${who} cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system": can only access leases in the "kube-node-lease" system namespace`,
        leaseDetails(),
      ),
    );
    expect((await raw(n5, "GET", LEASES)).body.message).toBe(
      `leases.coordination.k8s.io is forbidden: ${who} cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only get, create, update, patch, or delete a node lease`,
    );

    // Pods: it creates only mirror pods bound to and owned by itself, and deletes or evicts only its own.
    const PODS = "/api/v1/namespaces/default/pods";
    const uid = ((await raw(masters(), "GET", "/api/v1/nodes/n5")).body.metadata as { uid: string }).uid;
    const pod = (name: string, nodeName: string, extra: Record<string, unknown> = {}) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name,
        annotations: { "kubernetes.io/config.mirror": "hash" } as Record<string, string>,
        ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "n5", uid, controller: true }],
      },
      spec: { nodeName, containers: [{ name: "c", image: "pause" }], ...extra },
    });
    const podRefused = (name: string, why: string) =>
      forbidden(`pods "${name}" is forbidden: ${why}`, { name, kind: "pods" });
    const plain = pod("plain", "n5");
    plain.metadata.annotations = {};
    expect(await raw(n5, "POST", PODS, plain)).toEqual(
      podRefused(
        "plain",
        'pod does not have "kubernetes.io/config.mirror" annotation, node "n5" can only create mirror pods',
      ),
    );
    expect(await raw(n5, "POST", PODS, pod("elsewhere", "n6"))).toEqual(
      podRefused("elsewhere", 'node "n5" can only create pods with spec.nodeName set to itself'),
    );
    const withSecret = pod("secretive", "n5", { volumes: [{ name: "v", secret: { secretName: "s-used" } }] });
    expect(await raw(n5, "POST", PODS, withSecret)).toEqual(
      podRefused("secretive", 'node "n5" can not create pods that reference secrets'),
    );
    const env = [{ name: "E", valueFrom: { configMapKeyRef: { name: "cm", key: "k" } } }];
    const withConfigMap = pod("configured", "n5", { containers: [{ name: "c", image: "pause", env }] });
    expect(await raw(n5, "POST", PODS, withConfigMap)).toEqual(
      podRefused("configured", 'node "n5" can not create pods that reference configmaps'),
    );
    expect((await raw(n5, "POST", PODS, pod("mirror", "n5"))).status).toBe(201);
    const foreign = { ...pod("foreign", "n6"), metadata: { name: "foreign" } };
    expect((await raw(masters(), "POST", PODS, foreign)).status).toBe(201);
    expect(await raw(n5, "DELETE", `${PODS}/foreign`)).toEqual(
      podRefused("foreign", 'node "n5" can only delete pods with spec.nodeName set to itself'),
    );
    const eviction = { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "foreign", namespace: "default" } };
    expect(await raw(n5, "POST", `${PODS}/foreign/eviction`, eviction)).toEqual(
      podRefused("foreign", "node n5 can only evict pods with spec.nodeName set to itself"),
    );
    expect((await raw(n5, "DELETE", `${PODS}/mirror`)).status).toBe(200);

    // Secrets: only those a pod bound to it references (the Node authorizer's graph).
    const secret = (name: string) => ({ apiVersion: "v1", kind: "Secret", metadata: { name }, data: { k: "dg==" } });
    for (const name of ["s-used", "s-other"]) {
      expect((await raw(masters(), "POST", "/api/v1/namespaces/default/secrets", secret(name))).status).toBe(201);
    }
    const user = { ...pod("user", "n5", { volumes: [{ name: "v", secret: { secretName: "s-used" } }] }) };
    user.metadata = { ...user.metadata, annotations: {}, ownerReferences: [] };
    expect((await raw(masters(), "POST", PODS, user)).status).toBe(201);
    expect((await raw(n5, "GET", "/api/v1/namespaces/default/secrets/s-used")).status).toBe(200);
    expect(await raw(n5, "GET", "/api/v1/namespaces/default/secrets/s-other")).toEqual(
      forbidden(
        `secrets "s-other" is forbidden: ${who} cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n5' and this object`,
        { name: "s-other", kind: "secrets" },
      ),
    );
    expect((await raw(n5, "GET", "/api/v1/namespaces/default/secrets")).body.message).toBe(
      `secrets is forbidden: ${who} cannot list resource "secrets" in API group "" in the namespace "default": No Object name found`,
    );
  });

  it("Node authorizer and NodeRestriction for service-account tokens, pod status and PVC status: only what its own pods use", async () => {
    const n7 = cert("system:node:n7", ["system:nodes"]);
    const who = 'User "system:node:n7"';
    const NS = "/api/v1/namespaces/default";
    for (const name of ["runner", "idle"]) {
      expect((await raw(masters(), "POST", `${NS}/serviceaccounts`, { metadata: { name } })).status).toBe(201);
    }
    const claim = (name: string) => ({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      status: { phase: "Bound", capacity: { storage: "1Gi" } },
    });
    const uids: Record<string, string> = {};
    for (const [name, nodeName, serviceAccountName, claimName] of [
      ["p7", "n7", "runner", "claim7"],
      ["p8", "n8", "idle", "claim8"],
    ] as const) {
      expect((await raw(masters(), "POST", `${NS}/persistentvolumeclaims`, claim(claimName))).status).toBe(201);
      const created = await raw(masters(), "POST", `${NS}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, labels: { app: name } },
        spec: {
          nodeName,
          serviceAccountName,
          containers: [{ name: "c", image: "pause" }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
        },
      });
      expect(created.status).toBe(201);
      uids[name] = (created.body.metadata as { uid: string }).uid;
    }

    // TokenRequest: the Node authorizer lets it ask only for a service account its pods run as,
    // NodeRestriction only with a binding to a pod of its own (uid checked).
    const tokenFor = (sa: string, boundObjectRef?: Record<string, string>) =>
      raw(n7, "POST", `${NS}/serviceaccounts/${sa}/token`, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: {
          audiences: ["https://kubernetes.default.svc.cluster.local"],
          ...(boundObjectRef ? { boundObjectRef } : {}),
        },
      });
    const pod = (name: string, uid = uids[name]) => ({ apiVersion: "v1", kind: "Pod", name, ...(uid ? { uid } : {}) });
    const saRefused = (name: string, why: string) =>
      forbidden(`serviceaccounts "${name}" is forbidden: ${why}`, { name, kind: "serviceaccounts" });
    expect(await tokenFor("idle", pod("p8"))).toEqual(
      saRefused(
        "idle",
        `${who} cannot create resource "serviceaccounts/token" in API group "" in the namespace "default": no relationship found between node 'n7' and this object`,
      ),
    );
    expect(await tokenFor("runner")).toEqual(saRefused("runner", "node requested token not bound to a pod"));
    expect(await tokenFor("runner", { apiVersion: "v1", kind: "Secret", name: "s" })).toEqual(
      saRefused("runner", "node requested token not bound to a pod"),
    );
    expect(await tokenFor("runner", pod("p7", ""))).toEqual(
      saRefused("runner", "node requested token with a pod binding without a uid"),
    );
    expect(await tokenFor("runner", pod("p7", "0000"))).toEqual(
      saRefused(
        "runner",
        "the UID in the bound object reference (0000) does not match the UID in record. The object might have been deleted and then recreated",
      ),
    );
    expect(await tokenFor("runner", pod("p8"))).toEqual(
      saRefused("runner", "node requested token bound to a pod scheduled on a different node"),
    );
    expect((await tokenFor("runner", pod("gone", "1111"))).body).toMatchObject({
      reason: "NotFound",
      message: 'pods "gone" not found',
      code: 404,
    });
    const issued = await tokenFor("runner", pod("p7"));
    expect(issued.status).toBe(201);
    expect((issued.body.status as { token: string }).token.split(".")).toHaveLength(3);

    // Pod status: only of pods bound to itself, with no label change; the spec stays as stored.
    const podRefused = (name: string, why: string) =>
      forbidden(`pods "${name}" is forbidden: ${why}`, { name, kind: "pods" });
    expect(await raw(n7, "PATCH", `${NS}/pods/p8/status`, { status: { phase: "Running" } })).toEqual(
      podRefused("p8", 'node "n7" can only update pod status for pods with spec.nodeName set to itself'),
    );
    const current = (await raw(masters(), "GET", `${NS}/pods/p8`)).body;
    expect(await raw(n7, "PUT", `${NS}/pods/p8/status`, { ...current, status: { phase: "Failed" } })).toEqual(
      podRefused("p8", 'node "n7" can only update pod status for pods with spec.nodeName set to itself'),
    );
    expect(
      await raw(n7, "PATCH", `${NS}/pods/p7/status`, {
        metadata: { labels: { app: "other" } },
        status: { phase: "Running" },
      }),
    ).toEqual(podRefused("p7", 'node "n7" cannot update labels through pod status'));
    const running = await raw(n7, "PATCH", `${NS}/pods/p7/status`, {
      spec: { nodeName: "n8" },
      status: { phase: "Running" },
    });
    expect(running.status).toBe(200);
    const stored = (await raw(masters(), "GET", `${NS}/pods/p7`)).body as {
      spec: { nodeName: string };
      status: object;
    };
    expect(stored.status).toEqual({ phase: "Running" });
    expect(stored.spec.nodeName).toBe("n7");
    expect((await raw(masters(), "GET", `${NS}/pods/p8`)).body.status).toBeUndefined();

    // PVCs: a claim its pods use, read by name, its status written only in the resize fields.
    const pvcRefused = (name: string, why: string) =>
      forbidden(`persistentvolumeclaims "${name}" is forbidden: ${why}`, { name, kind: "persistentvolumeclaims" });
    const cannot = (verb: string, resource: string, why: string) =>
      `${who} cannot ${verb} resource "${resource}" in API group "" in the namespace "default": ${why}`;
    const unrelated = "no relationship found between node 'n7' and this object";
    expect((await raw(n7, "GET", `${NS}/persistentvolumeclaims/claim7`)).status).toBe(200);
    expect(await raw(n7, "GET", `${NS}/persistentvolumeclaims/claim8`)).toEqual(
      pvcRefused("claim8", cannot("get", "persistentvolumeclaims", unrelated)),
    );
    expect(await raw(n7, "PATCH", `${NS}/persistentvolumeclaims/claim8/status`, { status: { phase: "Lost" } })).toEqual(
      pvcRefused("claim8", cannot("patch", "persistentvolumeclaims/status", unrelated)),
    );
    expect(await raw(n7, "PATCH", `${NS}/persistentvolumeclaims/claim7`, { metadata: { labels: { a: "b" } } })).toEqual(
      pvcRefused("claim7", cannot("patch", "persistentvolumeclaims", "can only get individual resources of this type")),
    );
    expect(await raw(n7, "GET", `${NS}/persistentvolumeclaims/claim7/status`)).toEqual(
      pvcRefused("claim7", cannot("get", "persistentvolumeclaims/status", "can only get/update/patch this type")),
    );
    const other = 'node "n7" is not allowed to update fields other than status.capacity and status.conditions';
    expect(
      await raw(n7, "PATCH", `${NS}/persistentvolumeclaims/claim7/status`, {
        status: { allocatedResources: { storage: "2Gi" } },
      }),
    ).toEqual(pvcRefused("claim7", `${other}: status.allocatedResources`));
    expect(
      await raw(n7, "PATCH", `${NS}/persistentvolumeclaims/claim7/status`, { metadata: { labels: { a: "b" } } }),
    ).toEqual(pvcRefused("claim7", `${other}: metadata.labels`));
    const resized = await raw(n7, "PATCH", `${NS}/persistentvolumeclaims/claim7/status`, {
      status: {
        capacity: { storage: "2Gi" },
        conditions: [{ type: "FileSystemResizePending", status: "True" }],
      },
    });
    expect(resized.status).toBe(200);
    expect((await raw(masters(), "GET", `${NS}/persistentvolumeclaims/claim7`)).body.status).toEqual({
      phase: "Bound",
      capacity: { storage: "2Gi" },
      conditions: [{ type: "FileSystemResizePending", status: "True" }],
    });
  });

  it("service-account tokens from the TokenRequest API authenticate, and RBAC refuses them without a binding", async () => {
    expect((await kubectl("alice", admin(), ["create", "serviceaccount", "probe"])).code).toBe(0);
    const token = (await kubectl("alice", admin(), ["create", "token", "probe"])).stdout.trim();
    expect(token.split(".")).toHaveLength(3);
    const r = await kubectl("sa", { token }, ["get", "nodes"]);
    expect(r.stderr).toContain('User "system:serviceaccount:default:probe" cannot list resource "nodes"');
    const tampered = `${token.slice(0, -4)}AAAA`;
    expect((await kubectl("sa-tampered", { token: tampered }, ["get", "nodes"])).stderr).toMatch(/Unauthorized/);
  });

  it("namespaced Secrets under a Role with resourceNames: get and update of that one, 404, 409, base64, as the real one answers", async () => {
    const m = masters();
    for (const args of [
      ["create", "namespace", "shelf"],
      ["create", "serviceaccount", "agent", "-n", "shelf"],
      ["create", "secret", "generic", "kept", "-n", "shelf"],
      ["create", "secret", "generic", "other", "-n", "shelf", "--from-literal=a=b"],
      ["create", "role", "kept", "-n", "shelf", "--verb=get,update", "--resource=secrets", "--resource-name=kept"],
      ["create", "rolebinding", "kept", "-n", "shelf", "--role=kept", "--serviceaccount=shelf:agent"],
    ]) {
      const r = await kubectl("masters", m, args);
      expect(r.stderr).toBe("");
    }
    const token = { token: (await kubectl("masters", m, ["create", "token", "agent", "-n", "shelf"])).stdout.trim() };
    const who = 'User "system:serviceaccount:shelf:agent"';
    const at = (name: string, ns = "shelf") => `/api/v1/namespaces/${ns}/secrets/${name}`;
    const refusal = (verb: string, name: string, ns = "shelf") =>
      forbidden(
        `secrets "${name}" is forbidden: ${who} cannot ${verb} resource "secrets" in API group "" in the namespace "${ns}"`,
        { name, kind: "secrets" },
      );

    // The one Secret the Role names, in the RoleBinding's namespace; nothing else.
    const read = await raw(token, "GET", at("kept"));
    expect(read.status).toBe(200);
    expect(read.body).not.toHaveProperty("data");
    expect(await raw(token, "GET", at("other"))).toEqual(refusal("get", "other"));
    expect(await raw(token, "PUT", at("other"), { metadata: { name: "other" } })).toEqual(refusal("update", "other"));
    expect(await raw(token, "GET", at("kept", "default"))).toEqual(refusal("get", "kept", "default"));
    const listed = await kubectl("agent", token, ["get", "secrets", "-n", "shelf"]);
    expect(listed.stderr).toContain(
      `Error from server (Forbidden): secrets is forbidden: ${who} cannot list resource "secrets" in API group "" in the namespace "shelf"`,
    );
    expect((await kubectl("agent", token, ["delete", "secret", "kept", "-n", "shelf"])).stderr).toContain(
      `secrets "kept" is forbidden: ${who} cannot delete resource "secrets" in API group ""`,
    );

    // Update with the resourceVersion read; the stale one is a Conflict.
    const secret = read.body as { metadata: { resourceVersion: string } };
    const updated = await raw(token, "PUT", at("kept"), { ...secret, data: { hostId: "aG9zdA==" } });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toEqual({ hostId: "aG9zdA==" });
    expect(await raw(token, "PUT", at("kept"), { ...secret, data: { hostId: "b3RoZXI=" } })).toEqual({
      status: 409,
      body: {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message:
          'Operation cannot be fulfilled on secrets "kept": the object has been modified; please apply your changes to the latest version and try again',
        reason: "Conflict",
        details: { name: "kept", kind: "secrets" },
        code: 409,
      },
    });
    // data is base64 (Go's StdEncoding: "admin" lacks its padding at byte 4, "My-pass" has a '-' at 2).
    const fresh = (await raw(token, "GET", at("kept"))).body;
    for (const [value, byte] of [
      ["admin", 4],
      ["My-pass", 2],
      ["YWRtaW4", 4],
    ] as const) {
      expect(await raw(token, "PUT", at("kept"), { ...fresh, data: { hostId: value } })).toEqual({
        status: 400,
        body: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${byte}`,
          reason: "BadRequest",
          code: 400,
        },
      });
    }
    // stringData is merged into data and never stored.
    const merged = await raw(token, "PUT", at("kept"), { ...fresh, data: { a: "YQ==" }, stringData: { b: "bee" } });
    expect(merged.status).toBe(200);
    expect((await raw(token, "GET", at("kept"))).body).toMatchObject({ data: { a: "YQ==", b: "YmVl" } });
    expect((await raw(token, "GET", at("kept"))).body).not.toHaveProperty("stringData");

    // Gone: 404 for who may read it; the Role gone: 403.
    expect((await kubectl("masters", m, ["delete", "secret", "kept", "-n", "shelf"])).code).toBe(0);
    expect(await raw(token, "GET", at("kept"))).toEqual({
      status: 404,
      body: {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: 'secrets "kept" not found',
        reason: "NotFound",
        details: { name: "kept", kind: "secrets" },
        code: 404,
      },
    });
    expect((await kubectl("masters", m, ["delete", "role", "kept", "-n", "shelf"])).code).toBe(0);
    expect(await raw(token, "GET", at("kept"))).toEqual(refusal("get", "kept"));
  });

  it("a Service's clusterIP must be in --service-cluster-ip-range and free, as the real allocator says", async () => {
    const svc = (name: string, ip: string) =>
      kubectl("alice", admin(), [
        "create",
        "service",
        "clusterip",
        name,
        `--clusterip=${ip}`,
        "--tcp=53:53",
        "-n",
        "kube-system",
      ]);
    expect((await svc("kube-dns", "10.96.0.10")).code).toBe(0);
    expect((await svc("again", "10.96.0.10")).stderr).toContain(
      "failed to allocate IP 10.96.0.10: provided IP is already allocated",
    );
    expect((await svc("outside", "10.20.0.10")).stderr).toContain(
      "the provided IP (10.20.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/16",
    );
    const got = JSON.parse(
      (await kubectl("alice", admin(), ["get", "svc", "kube-dns", "-n", "kube-system", "-o", "json"])).stdout,
    );
    expect(got.spec.clusterIP).toBe("10.96.0.10");
  });

  it("a TokenRequest bound to a pod carries the real claims; TokenReview and bearer authentication refuse it once the pod is gone or replaced", async () => {
    const m = masters();
    const NS = "/api/v1/namespaces/default";
    const AUDIENCE = "https://kubernetes.default.svc.cluster.local";
    expect((await raw(m, "POST", "/api/v1/nodes", { metadata: { name: "n9" } })).status).toBe(201);
    const sa = await raw(m, "POST", `${NS}/serviceaccounts`, { metadata: { name: "bound" } });
    expect((await raw(m, "POST", `${NS}/serviceaccounts`, { metadata: { name: "stranger" } })).status).toBe(201);
    const saUid = (sa.body.metadata as { uid: string }).uid;
    const holder = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "holder" },
      spec: { nodeName: "n9", serviceAccountName: "bound", containers: [{ name: "c", image: "pause" }] },
    };
    const created = await raw(m, "POST", `${NS}/pods`, holder);
    const podUid = (created.body.metadata as { uid: string }).uid;
    const request = (saName: string, boundObjectRef?: Record<string, string>, extra: Record<string, unknown> = {}) =>
      raw(m, "POST", `${NS}/serviceaccounts/${saName}/token`, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { ...(boundObjectRef ? { boundObjectRef } : {}), ...extra },
      });
    const podRef = (uid = podUid, name = "holder") => ({ apiVersion: "v1", kind: "Pod", name, uid });

    // The registry's own checks of the binding (token.go), in its words.
    expect(await request("stranger", podRef())).toEqual(
      statusAnswer(
        400,
        "BadRequest",
        'cannot bind token for serviceaccount "stranger" to pod running with different serviceaccount name.',
      ),
    );
    expect(await request("bound", podRef("0000"))).toEqual(
      statusAnswer(
        409,
        "Conflict",
        'Operation cannot be fulfilled on Pod "holder": the UID in the bound object reference (0000) does not match the UID in record. The object might have been deleted and then recreated',
        { name: "holder", kind: "Pod" },
      ),
    );
    expect(await request("bound", podRef("", "absent"))).toEqual(
      statusAnswer(404, "NotFound", 'pods "absent" not found', { name: "absent", kind: "pods" }),
    );
    expect(await request("bound", { apiVersion: "v1", kind: "ConfigMap", name: "c" })).toEqual(
      statusAnswer(400, "BadRequest", "cannot bind token to object of type /v1, Kind=ConfigMap"),
    );
    expect((await request("bound", podRef(), { expirationSeconds: 60 })).body.message).toBe(
      'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes',
    );

    // The claims claims.go writes; 1.29 has ServiceAccountTokenPodNodeInfo and ServiceAccountTokenJTI off.
    const issued = await request("bound", podRef());
    expect(issued.status).toBe(201);
    const token = (issued.body.status as { token: string }).token;
    const claims = jwtPart(token, 1);
    expect(claims["kubernetes.io"]).toEqual({
      namespace: "default",
      serviceaccount: { name: "bound", uid: saUid },
      pod: { name: "holder", uid: podUid },
    });
    expect(claims).not.toHaveProperty("jti");
    // go-jose writes the merged claims as a sorted map; the header names the key (jwt.go), no typ.
    expect(Object.keys(claims)).toEqual(["aud", "exp", "iat", "iss", "kubernetes.io", "nbf", "sub"]);
    const header = jwtPart(token, 0);
    expect(header).toEqual({ alg: "ES256", kid: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(claims).toMatchObject({ aud: [AUDIENCE], iss: AUDIENCE, sub: "system:serviceaccount:default:bound" });

    const review = async (audiences?: string[]) =>
      (
        await raw(m, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenReview",
          spec: { token, ...(audiences ? { audiences } : {}) },
        })
      ).body.status;
    expect(await review()).toEqual({
      authenticated: true,
      user: {
        username: "system:serviceaccount:default:bound",
        uid: saUid,
        groups: ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
        extra: {
          "authentication.kubernetes.io/pod-name": ["holder"],
          "authentication.kubernetes.io/pod-uid": [podUid],
        },
      },
      audiences: [AUDIENCE],
    });
    expect(await review(["vault"])).toEqual({
      user: {},
      error: `token audiences ["${AUDIENCE}"] is invalid for the target audiences ["vault"]`,
    });
    // Authenticated (RBAC then refuses it), while its pod stands.
    expect((await raw({ token }, "GET", `${NS}/pods`)).body.message).toContain(
      'User "system:serviceaccount:default:bound" cannot list resource "pods"',
    );

    // The pod deleted: invalidated. Replaced by one with another uid: the uid mismatch.
    expect((await raw(m, "DELETE", `${NS}/pods/holder`)).status).toBe(200);
    expect(await review()).toEqual({ user: {}, error: "service account token has been invalidated" });
    expect((await raw({ token }, "GET", `${NS}/pods`)).status).toBe(401);
    const again = await raw(m, "POST", `${NS}/pods`, holder);
    const newUid = (again.body.metadata as { uid: string }).uid;
    expect(await review()).toEqual({
      user: {},
      error: `pod UID (${newUid}) does not match service account pod ref claim (${podUid})`,
    });
    expect((await raw({ token }, "GET", `${NS}/pods`)).body).toMatchObject({ reason: "Unauthorized", code: 401 });

    // A service account replaced under an unbound token: its uid no longer matches.
    const plain = (await request("stranger")).body.status as { token: string };
    const strangerUid = ((await raw(m, "GET", `${NS}/serviceaccounts/stranger`)).body.metadata as { uid: string }).uid;
    expect((await raw(m, "DELETE", `${NS}/serviceaccounts/stranger`)).status).toBe(200);
    const recreated = await raw(m, "POST", `${NS}/serviceaccounts`, { metadata: { name: "stranger" } });
    const reviewed = await raw(m, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
      spec: { token: plain.token },
    });
    expect(reviewed.status).toBe(201);
    expect(reviewed.body.status).toEqual({
      user: {},
      error: `service account UID (${(recreated.body.metadata as { uid: string }).uid}) does not match claim (${strangerUid})`,
    });
  });

  it("with ServiceAccountTokenPodNodeInfo and ServiceAccountTokenJTI (on by default from 1.30) a pod-bound token names its node and carries a jti", async () => {
    const url = await startApiserver([
      "--feature-gates=ServiceAccountTokenPodNodeInfo=true,ServiceAccountTokenJTI=true",
    ]);
    const m = masters();
    const NS = "/api/v1/namespaces/default";
    const node = await rawAt(url, m, "POST", "/api/v1/nodes", { metadata: { name: "n11" } });
    expect((await rawAt(url, m, "POST", `${NS}/serviceaccounts`, { metadata: { name: "runner" } })).status).toBe(201);
    const pods: Record<string, string> = {};
    for (const [name, nodeName] of [
      ["on-node", "n11"],
      ["on-missing-node", "n12"],
    ] as const) {
      const pod = await rawAt(url, m, "POST", `${NS}/pods`, {
        metadata: { name },
        spec: { nodeName, serviceAccountName: "runner", containers: [{ name: "c", image: "pause" }] },
      });
      pods[name] = (pod.body.metadata as { uid: string }).uid;
    }
    const claimsFor = async (pod: string) => {
      const issued = await rawAt(url, m, "POST", `${NS}/serviceaccounts/runner/token`, {
        spec: { boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod, uid: pods[pod] } },
      });
      const token = (issued.body.status as { token: string }).token;
      return { token, claims: jwtPart(token, 1) };
    };
    const { token, claims } = await claimsFor("on-node");
    const nodeUid = (node.body.metadata as { uid: string }).uid;
    expect(claims["kubernetes.io"].node).toEqual({ name: "n11", uid: nodeUid });
    expect(claims.jti).toMatch(/^[0-9a-f-]{36}$/);
    // A Node that is not there is still named, without a uid (token.go).
    expect((await claimsFor("on-missing-node")).claims["kubernetes.io"].node).toEqual({ name: "n12" });
    const reviewed = await rawAt(url, m, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", { spec: { token } });
    expect((reviewed.body.status as { user: { extra: unknown } }).user.extra).toEqual({
      "authentication.kubernetes.io/pod-name": ["on-node"],
      "authentication.kubernetes.io/pod-uid": [pods["on-node"]],
      "authentication.kubernetes.io/credential-id": [`JTI=${claims.jti}`],
      "authentication.kubernetes.io/node-name": ["n11"],
      "authentication.kubernetes.io/node-uid": [nodeUid],
    });
  });

  it("the registry's preconditions: a PUT's metadata.uid and DeleteOptions' uid/resourceVersion that do not match are 409 in the real words", async () => {
    const m = masters();
    const conflict = (message: string, details: Record<string, string>) =>
      statusAnswer(409, "Conflict", message, details);
    const at = "/api/v1/namespaces/default/secrets/pre";
    const created = await raw(m, "POST", "/api/v1/namespaces/default/secrets", { metadata: { name: "pre" } });
    const { uid, resourceVersion } = created.body.metadata as { uid: string; resourceVersion: string };
    const stored = (await raw(m, "GET", at)).body;
    expect(await raw(m, "PUT", at, { ...stored, metadata: { ...(stored.metadata as object), uid: "0000" } })).toEqual(
      conflict(
        `Operation cannot be fulfilled on secrets "pre": StorageError: invalid object, Code: 4, Key: /registry/secrets/default/pre, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 0000, UID in object meta: ${uid}`,
        { name: "pre", kind: "secrets" },
      ),
    );
    const options = (preconditions: Record<string, string>) => ({
      kind: "DeleteOptions",
      apiVersion: "v1",
      preconditions,
    });
    expect(await raw(m, "DELETE", at, options({ uid: "0000" }))).toEqual(
      conflict(
        `Operation cannot be fulfilled on Secret "pre": the UID in the precondition (0000) does not match the UID in record (${uid}). The object might have been deleted and then recreated`,
        { name: "pre", kind: "Secret" },
      ),
    );
    expect(await raw(m, "DELETE", at, options({ resourceVersion: "1" }))).toEqual(
      conflict(
        `Operation cannot be fulfilled on Secret "pre": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${resourceVersion}). The object might have been modified`,
        { name: "pre", kind: "Secret" },
      ),
    );
    expect((await raw(m, "GET", at)).status).toBe(200);
    expect((await raw(m, "DELETE", at, options({ uid, resourceVersion }))).status).toBe(200);

    // A grouped kind names its group; Leases (their own store) and Namespaces (their own Delete) alike.
    const LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    const lease = await raw(m, "POST", LEASES, { metadata: { name: "pre" }, spec: { holderIdentity: "a" } });
    const leaseUid = (lease.body.metadata as { uid: string }).uid;
    expect(leaseUid).toMatch(/^[0-9a-f-]{36}$/);
    expect(await raw(m, "PUT", `${LEASES}/pre`, { ...lease.body, metadata: { name: "pre", uid: "0000" } })).toEqual(
      conflict(
        `Operation cannot be fulfilled on leases.coordination.k8s.io "pre": StorageError: invalid object, Code: 4, Key: /registry/leases/kube-system/pre, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 0000, UID in object meta: ${leaseUid}`,
        { name: "pre", group: "coordination.k8s.io", kind: "leases" },
      ),
    );
    expect(await raw(m, "DELETE", `${LEASES}/pre`, options({ uid: "0000" }))).toEqual(
      conflict(
        `Operation cannot be fulfilled on Lease.coordination.k8s.io "pre": the UID in the precondition (0000) does not match the UID in record (${leaseUid}). The object might have been deleted and then recreated`,
        { name: "pre", group: "coordination.k8s.io", kind: "Lease" },
      ),
    );
    const ns = await raw(m, "POST", "/api/v1/namespaces", { metadata: { name: "pre-ns" } });
    const nsUid = (ns.body.metadata as { uid: string }).uid;
    expect(await raw(m, "DELETE", "/api/v1/namespaces/pre-ns", options({ uid: "0000" }))).toEqual(
      conflict(
        `Operation cannot be fulfilled on namespaces "pre-ns": Precondition failed: UID in precondition: 0000, UID in object meta: ${nsUid}`,
        { name: "pre-ns", kind: "namespaces" },
      ),
    );
  });

  it("NodeRestriction: a mirror pod may not reference clustertrustbundles, nor secrets through any volume source or an ephemeral container", async () => {
    const n10 = cert("system:node:n10", ["system:nodes"]);
    const registered = await raw(n10, "POST", "/api/v1/nodes", { metadata: { name: "n10" } });
    const uid = (registered.body.metadata as { uid: string }).uid;
    const mirror = (name: string, spec: Record<string, unknown>) =>
      raw(n10, "POST", "/api/v1/namespaces/default/pods", {
        metadata: {
          name,
          annotations: { "kubernetes.io/config.mirror": "hash" },
          ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "n10", uid, controller: true }],
        },
        spec: { nodeName: "n10", containers: [{ name: "c", image: "pause" }], ...spec },
      });
    const refused = (name: string, what: string) =>
      forbidden(`pods "${name}" is forbidden: node "n10" can not create pods that reference ${what}`, {
        name,
        kind: "pods",
      });
    const bundle = { clusterTrustBundle: { signerName: "example.com/signer", path: "ca.pem" } };
    const claim = { name: "data", persistentVolumeClaim: { claimName: "c" } };
    // admission.go's order: clustertrustbundles before persistentvolumeclaims.
    expect(await mirror("trusting", { volumes: [{ name: "ctb", projected: { sources: [bundle] } }, claim] })).toEqual(
      refused("trusting", "clustertrustbundles"),
    );
    const csi = { name: "v", csi: { driver: "d", nodePublishSecretRef: { name: "s" } } };
    expect(await mirror("csi", { volumes: [csi] })).toEqual(refused("csi", "secrets"));
    const ephemeral = [{ name: "e", image: "busybox", envFrom: [{ secretRef: { name: "s" } }] }];
    expect(await mirror("ephemeral", { ephemeralContainers: ephemeral })).toEqual(refused("ephemeral", "secrets"));
    expect((await mirror("plain-mirror", {})).status).toBe(201);
  });

  it("a privileged container is refused unless started with --allow-privileged=true (here: not)", async () => {
    const run = (name: string, extra: string[]) =>
      kubectl("alice", admin(), ["run", name, "--image=busybox", "--restart=Never", ...extra]);
    const refused = await run("priv", ["--privileged"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'The Pod "priv" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy',
    );
    expect((await run("plain", [])).stdout).toContain("pod/plain created");
  });
});
