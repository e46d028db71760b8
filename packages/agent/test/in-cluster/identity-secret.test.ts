import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IN_CLUSTER_IDENTITY_SECRET, IN_CLUSTER_REGISTRATION_ANNOTATION } from "@keelson/protocol";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startInClusterApi } from "../../../../test/support/incluster-cluster.ts";
import { inClusterCredentials } from "../../src/in-cluster/cluster-reading.ts";
import { IdentitySecret } from "../../src/in-cluster/identity-secret.ts";
import { createKubeObjects } from "../../src/phases/kube-api.ts";
import { type HostIdentity, readIdentity } from "../../src/registration.ts";
import { StateDir } from "../../src/state-dir.ts";

/**
 * The in-cluster agent's identity kept in its Secret, against the strict stand-in kube-apiserver
 * with the deployment YAML's own Role, RoleBinding and empty Secret, read and written with the
 * service-account token as the pod has it.
 */

let cluster: Awaited<ReturnType<typeof startInClusterApi>>;
const dirs: string[] = [];
const SECRET = `/api/v1/namespaces/keelson-agent/secrets/${IN_CLUSTER_IDENTITY_SECRET}`;
const ROLE = "/apis/rbac.authorization.k8s.io/v1/namespaces/keelson-agent/roles";
const IDENTITY: HostIdentity = {
  hostId: "h-payments",
  credential: "khc_the-credential-itself",
  projectId: "p1",
  controlPlane: "https://keelson.test:8443",
  registeredAt: "2026-11-27T00:00:00.000Z",
};

beforeAll(async () => {
  cluster = await startInClusterApi();
}, 60_000);
afterAll(() => {
  cluster?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function stateDir(): StateDir {
  const dir = mkdtempSync(join(tmpdir(), "keelson-identity-secret-"));
  dirs.push(dir);
  return new StateDir(dir);
}

/** An IdentitySecret of the pod, and every line it logged. */
function kept(api = { host: cluster.host, port: cluster.port, serviceAccountDir: cluster.serviceAccountDir }) {
  const lines: string[] = [];
  const log = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
  return { secret: new IdentitySecret(api, log, 5_000), lines };
}

interface Stored {
  data?: Record<string, string>;
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
}
const stored = async () => (await cluster.kube("GET", SECRET)) as unknown as Stored;
const decoded = (data: Record<string, string> | undefined, key: string) =>
  Buffer.from(data?.[key] ?? "", "base64").toString();

describe("the in-cluster agent's identity in its Secret", () => {
  it("a registration is written into the empty Secret: the host id, credential and project, and the registration the Secret names, base64, nothing else", async () => {
    const empty = await stored();
    expect(empty.data).toBeUndefined();
    // The deployment YAML's own annotation (startInClusterApi's registration id "c").
    expect(empty.metadata.annotations).toEqual({ [IN_CLUSTER_REGISTRATION_ANNOTATION]: "c" });
    const { secret, lines } = kept();
    await secret.keep(IDENTITY);
    expect(secret.problem).toBeUndefined();
    const data = (await stored()).data ?? {};
    expect(Object.keys(data).sort()).toEqual(["credential", "hostId", "projectId", "registration"]);
    expect(decoded(data, "registration")).toBe("c");
    expect(Buffer.from(data.credential as string, "base64").toString()).toBe(IDENTITY.credential);
    expect(Buffer.from(data.hostId as string, "base64").toString()).toBe(IDENTITY.hostId);
    // Kept already: no second write.
    const version = (await stored()).metadata.resourceVersion;
    await secret.keep(IDENTITY);
    expect((await stored()).metadata.resourceVersion).toBe(version);
    expect(lines.join("")).toContain("identity kept in its Secret");
    expect(lines.join("")).not.toContain(IDENTITY.credential);
  });

  it("a new pod's empty state dir gets the kept identity back; a state dir with one keeps its own", async () => {
    const fresh = stateDir();
    const { secret, lines } = kept();
    expect(await secret.restore(fresh)).toBe(true);
    expect(readIdentity(fresh)).toMatchObject({
      hostId: IDENTITY.hostId,
      credential: IDENTITY.credential,
      projectId: "p1",
    });
    expect(lines.join("")).toContain("identity restored from its Secret; no registration");
    expect(lines.join("")).not.toContain(IDENTITY.credential);

    const own = stateDir();
    own.writeJson("identity.json", { ...IDENTITY, hostId: "h-own", credential: "khc_own" });
    expect(await secret.restore(own)).toBe(false);
    expect(readIdentity(own)?.hostId).toBe("h-own");
  });

  it("a Secret changed between read and write (409) is read again; a bounded number of times", async () => {
    const api = { host: cluster.host, port: cluster.port, serviceAccountDir: cluster.serviceAccountDir };
    const real = createKubeObjects(inClusterCredentials(api), 5_000);
    let writesBetween = 1;
    // An operator's write lands after the agent's read, before its update: the stand-in answers 409.
    const racing = {
      ...real,
      async replace<T>(path: string, object: T) {
        if (writesBetween-- > 0) {
          const now = await stored();
          await cluster.kube("PUT", SECRET, { ...now, metadata: { ...now.metadata }, data: { ...now.data } });
        }
        return real.replace(path, object);
      },
    };
    const log = pino({ level: "silent" });
    const other = { ...IDENTITY, hostId: "h-other", credential: "khc_other" };
    const secret = new IdentitySecret(api, log, 5_000, racing);
    await secret.keep(other);
    expect(secret.problem).toBeUndefined();
    expect(Buffer.from((await stored()).data?.hostId as string, "base64").toString()).toBe("h-other");

    writesBetween = 100;
    const losing = new IdentitySecret(api, log, 5_000, racing);
    await losing.keep(IDENTITY);
    expect(losing.problem).toBe(
      `the agent's identity cannot be kept: Secret ${IN_CLUSTER_IDENTITY_SECRET} cannot be written: it changed under 3 updates in a row (409 Conflict)`,
    );
    expect(writesBetween).toBe(97);
    expect(Buffer.from((await stored()).data?.hostId as string, "base64").toString()).toBe("h-other");
    await kept().secret.keep(IDENTITY);
  });

  it("without the Role: the API's 403 is the problem, logged; nothing restored; kept again once the Role is back", async () => {
    const role = (await cluster.kube("GET", `${ROLE}/keelson-agent`)) as { metadata: Record<string, unknown> };
    await cluster.kube("DELETE", `${ROLE}/keelson-agent`);
    const { secret, lines } = kept();
    const fresh = stateDir();
    expect(await secret.restore(fresh)).toBe(false);
    expect(readIdentity(fresh)).toBeUndefined();
    const refused = `secrets "${IN_CLUSTER_IDENTITY_SECRET}" is forbidden: User "system:serviceaccount:keelson-agent:keelson-agent" cannot get resource "secrets" in API group "" in the namespace "keelson-agent"`;
    expect(secret.problem).toBe(
      `the agent's identity cannot be kept: Secret ${IN_CLUSTER_IDENTITY_SECRET} cannot be read: GET ${SECRET}: the API answered 403: ${refused}`,
    );
    await secret.keep(IDENTITY);
    expect(secret.problem).toContain("the API answered 403");
    // Logged once while it stays the same.
    expect(lines.filter((l) => l.includes("identity not kept in its Secret"))).toHaveLength(1);

    const { resourceVersion: _rv, uid: _uid, creationTimestamp: _at, ...metadata } = role.metadata;
    await cluster.kube("POST", ROLE, { ...role, metadata });
    await secret.keep(IDENTITY);
    expect(secret.problem).toBeUndefined();
  });

  it("a new registration's YAML applied over the Secret: the identity kept under the earlier one is not restored, and the new one overwrites it", async () => {
    expect(decoded((await stored()).data, "hostId")).toBe(IDENTITY.hostId);
    // What `kubectl apply` of the next registration's YAML does to the Secret: its annotation
    // changes, the data it never set stays.
    const now = await stored();
    await cluster.kube("PUT", SECRET, {
      ...now,
      metadata: { ...now.metadata, annotations: { [IN_CLUSTER_REGISTRATION_ANNOTATION]: "c2" } },
    });
    const { secret, lines } = kept();
    const fresh = stateDir();
    expect(await secret.restore(fresh)).toBe(false);
    expect(readIdentity(fresh)).toBeUndefined();
    expect(secret.restoredHostId).toBeUndefined();
    expect(lines.join("")).toContain("the identity in its Secret was kept under another registration");
    expect(lines.join("")).not.toContain(IDENTITY.credential);

    // The agent registers with the new join token and keeps that identity, under "c2".
    const renewed = { ...IDENTITY, hostId: "h-renewed", credential: "khc_renewed" };
    await secret.keep(renewed);
    const data = (await stored()).data;
    expect(decoded(data, "hostId")).toBe("h-renewed");
    expect(decoded(data, "credential")).toBe("khc_renewed");
    expect(decoded(data, "registration")).toBe("c2");
    const next = kept().secret;
    const again = stateDir();
    expect(await next.restore(again)).toBe(true);
    expect(readIdentity(again)?.hostId).toBe("h-renewed");
    expect(next.restoredHostId).toBe("h-renewed");
  });

  it("a pod that started under one registration keeps its identity under that one, even if the next registration's YAML landed meanwhile", async () => {
    const setRegistration = async (registration: string, data?: Record<string, string>) => {
      const now = await stored();
      await cluster.kube("PUT", SECRET, {
        ...now,
        metadata: { ...now.metadata, annotations: { [IN_CLUSTER_REGISTRATION_ANNOTATION]: registration } },
        ...(data ? { data } : {}),
      });
    };
    await setRegistration("c3", {});
    // A new pod starts under "c3": nothing to restore, it registers...
    const { secret } = kept();
    expect(await secret.restore(stateDir())).toBe(false);
    // ...and before it keeps its identity, "c4"'s YAML is applied (the cluster registered again).
    await setRegistration("c4");
    const late = { ...IDENTITY, hostId: "h-late", credential: "khc_late" };
    await secret.keep(late);
    expect(decoded((await stored()).data, "registration")).toBe("c3");
    // c4's pod does not take the identity of c3's registration.
    const next = kept().secret;
    const fresh = stateDir();
    expect(await next.restore(fresh)).toBe(false);
    expect(readIdentity(fresh)).toBeUndefined();
  });

  it("an API nobody answers is the problem too, never a throw", async () => {
    const { secret } = kept({ host: "127.0.0.1", port: 1, serviceAccountDir: cluster.serviceAccountDir });
    expect(await secret.restore(stateDir())).toBe(false);
    expect(secret.problem).toMatch(/cannot be read: .*ECONNREFUSED/);
  });
});
