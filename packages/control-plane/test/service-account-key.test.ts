import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { serviceAccountKeyPem } from "../src/pki/service-account-key.ts";

const caKey = () =>
  generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }).toString();

describe("the cluster's service-account signing key", () => {
  it("is one ES256 key per cluster: the same for every master, another for another cluster or CA", () => {
    const ca = caKey();
    const key = serviceAccountKeyPem(ca, "cluster-a");
    expect(serviceAccountKeyPem(ca, "cluster-a")).toBe(key);
    expect(serviceAccountKeyPem(ca, "cluster-b")).not.toBe(key);
    expect(serviceAccountKeyPem(caKey(), "cluster-a")).not.toBe(key);
    const privateKey = createPrivateKey(key);
    expect(privateKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    // A usable pair: what it signs, its public half verifies (as the apiservers check tokens).
    const signature = sign("sha256", Buffer.from("token"), privateKey);
    expect(verify("sha256", Buffer.from("token"), createPublicKey(privateKey), signature)).toBe(true);
    expect(key).not.toContain(ca.split("\n")[1]);
  });
});
