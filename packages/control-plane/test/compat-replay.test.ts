import { clusters, firstRow } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

// A create body exactly as an existing Terraform provider of this interface sends it: nested
// etcdBackup, booleans where the spec has 0/1 integers, a number for mtuSize, empty node lists,
// and a read-only field (`status`) the client echoes back from an earlier read.
const CLIENT_BODY = `{"name":"tf-prod-east","containersCidr":"10.20.0.0/16","servicesCidr":"10.21.0.0/16","mtuSize":1440,"privileged":true,"appCatalogEnabled":false,"allowWorkloadsOnMaster":false,"networkPlugin":"calico","calicoIpIpMode":"Always","calicoNatOutgoing":true,"calicoV4BlockSize":"26","containerRuntime":"containerd","masterVipIpv4":"10.0.0.50","masterVipIface":"eth0","externalDnsName":"k8s.example.internal","k8sApiPort":"6443","etcdBackup":{"isEtcdBackupEnabled":1,"storageType":"local","storageProperties":{"localPath":"/var/backups/etcd"},"intervalInMins":60,"maxIntervalBackupCount":3,"dailyBackupTime":"02:30","maxTimestampBackupCount":7},"masterNodes":[],"workerNodes":[],"tags":{"team":"platform","env":"prod"},"status":"ok"}`;

const KEYSTONE_LOGIN = `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"tf-user","password":"s3cret-passw0rd","domain":{"id":"default"}}}},"scope":{"project":{"name":"default","domain":{"id":"default"}}}}}`;

describe("an existing client's create, replayed byte for byte", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
    const user = await t.request({
      method: "POST",
      url: `/v1/projects/${t.projectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "tf-user", password: "s3cret-passw0rd" },
    });
    expect(user.statusCode).toBeLessThan(300);
  });
  afterAll(async () => t.close());

  it("logs in Keystone-style under /qbert and creates the cluster it meant", async () => {
    const login = await t.app.inject({
      method: "POST",
      url: "/qbert/keystone/v3/auth/tokens",
      headers: { "content-type": "application/json" },
      payload: KEYSTONE_LOGIN,
    });
    expect(login.statusCode).toBe(201);
    const token = login.headers["x-subject-token"] as string;
    expect(token).toMatch(/^kst_[A-Za-z0-9_-]{43}$/);

    const res = await t.app.inject({
      method: "POST",
      url: `/qbert/v4/${t.projectId}/clusters`,
      headers: { "content-type": "application/json", "x-auth-token": token },
      payload: CLIENT_BODY,
    });
    expect(res.statusCode).toBe(200);
    const { uuid } = res.json();
    expect(String(res.headers.warning)).toContain("status");

    const stored = firstRow(await t.db.select().from(clusters).where(eq(clusters.id, uuid)));
    expect(stored?.name).toBe("tf-prod-east");
    expect(stored?.status).not.toBe("ok"); // the echoed read-only field was not applied
    expect(stored?.spec).toMatchObject({
      containersCidr: "10.20.0.0/16",
      servicesCidr: "10.21.0.0/16",
      mtuSize: "1440",
      privileged: true,
      appCatalogEnabled: 0,
      allowWorkloadsOnMaster: 0,
      networkPlugin: "calico",
      calicoNatOutgoing: true,
      calicoV4BlockSize: "26",
      k8sApiPort: "6443",
      isEtcdBackupEnabled: true,
      storageType: "local",
      localPath: "/var/backups/etcd",
      intervalInMins: 60,
      maxIntervalBackupCount: 3,
      dailyBackupTime: "02:30",
      maxTimestampBackupCount: 7,
      tags: { team: "platform", env: "prod" },
    });

    await t.app.keelson.runner.idle();
    const read = await t.app.inject({
      method: "GET",
      url: `/qbert/v4/${t.projectId}/clusters/${uuid}`,
      headers: { "x-auth-token": token },
    });
    const body = read.json();
    // Reads return the spec's types, not the client's.
    expect(body.mtuSize).toBe("1440");
    expect(body.privileged).toBe(1);
    expect(body.allowWorkloadsOnMaster).toBe(0);
    expect(body.isEtcdBackupEnabled).toBe(true);
    expect(body.etcdBackup).toMatchObject({
      isEtcdBackupEnabled: 1,
      storageType: "local",
      storageProperties: { localPath: "/var/backups/etcd" },
      intervalInMins: 60,
      maxIntervalBackupCount: 3,
      dailyBackupTime: "02:30",
      maxTimestampBackupCount: 7,
      taskStatus: "success",
    });
    expect(body.status).toBe("pending");
    expect(body.taskStatus).toBe("success");
  });
});
