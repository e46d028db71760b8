import { readFileSync } from "node:fs";
import { join } from "node:path";
import { IN_CLUSTER_IDENTITY_SECRET, IN_CLUSTER_REGISTRATION_ANNOTATION } from "@keelson/protocol";
import type { Logger } from "pino";
import { createKubeObjects, KubeApiError, type KubeObjects } from "../phases/kube-api.ts";
import { type HostIdentity, IDENTITY_FILE, readIdentity } from "../registration.ts";
import type { StateDir } from "../state-dir.ts";
import { type InClusterApi, inClusterCredentials } from "./cluster-reading.ts";

/**
 * The in-cluster agent's identity kept in a Secret of its namespace (the deployment YAML creates
 * it empty and grants get and update on it alone), because its state dir is the pod's emptyDir:
 * a pod rescheduled to another node restores the identity from the Secret and links again, where
 * the spent join token could not register it again. Kept: what linking needs, the host id and
 * its credential (and the project id the registration answered); the values are never logged.
 * An API that refuses or does not answer is logged and becomes `problem` (the cluster report's
 * error); the agent goes on with the identity in its state dir alone.
 *
 * Kept beside them: the registration the Secret's annotation named when it was written
 * (IN_CLUSTER_REGISTRATION_ANNOTATION). A cluster deregistered and registered again gets a new
 * YAML, whose `kubectl apply` changes that annotation and the join token but leaves the data (the
 * YAML sets none, and apply removes only what it set): an identity kept under another
 * registration than the one the Secret names now is the deleted one, so it is not restored and
 * the agent registers with the new join token, then overwrites it. A YAML downloaded again for
 * the same registration (a new agent version) names the same one: its pod links again as before.
 */

/** PUTs that meet a newer resourceVersion (409) before giving up until the next try. */
const CONFLICT_RETRIES = 3;

interface SecretObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> };
  type?: string;
  data?: Record<string, string>;
}

/** `registration`: the annotation's value when kept; "" for a Secret without it. */
type Kept = Pick<HostIdentity, "hostId" | "credential" | "projectId"> & { registration: string };

export class IdentitySecret {
  /** Why the identity is not kept in the Secret now; undefined once it is. */
  problem: string | undefined;
  /** The host id restore() put into the state dir, if it did. */
  restoredHostId: string | undefined;
  /**
   * The registration the Secret named when this pod started (restore() read it): the one this
   * pod's identity belongs to. keep() marks the identity with it, not with what the Secret names
   * by then: a new registration's YAML applied between the two must not get this identity.
   */
  private startedUnder: string | undefined;
  private readonly where = `Secret ${IN_CLUSTER_IDENTITY_SECRET}`;

  constructor(
    private readonly api: InClusterApi,
    private readonly log: Logger,
    timeoutMs: number,
    private readonly objects: KubeObjects = createKubeObjects(inClusterCredentials(api), timeoutMs),
  ) {}

  /**
   * A state dir without an identity gets the one the Secret keeps (true), so the agent links
   * with it instead of registering. False when the state dir has one, the Secret none or one
   * kept under another registration than it names now, or the Secret cannot be read (then
   * `problem` says why).
   */
  async restore(state: StateDir): Promise<boolean> {
    if (readIdentity(state)) return false;
    const secret = await this.read();
    if (secret) this.startedUnder = registrationOf(secret);
    const kept = secret && keptIn(secret);
    if (!kept) return false;
    const registration = registrationOf(secret);
    if (kept.registration !== registration) {
      this.log.warn(
        {
          hostId: kept.hostId,
          keptUnder: kept.registration || null,
          registration: registration || null,
          secret: this.where,
        },
        "the identity in its Secret was kept under another registration of this cluster than the Secret names now " +
          "(a new deployment YAML was applied): not restored; registering with the join token, and keeping the new identity there",
      );
      return false;
    }
    const { registration: _registration, ...identity } = kept;
    state.writeJson(IDENTITY_FILE, { ...identity, controlPlane: "", registeredAt: "" } satisfies HostIdentity);
    this.restoredHostId = kept.hostId;
    this.log.info({ hostId: kept.hostId, secret: this.where }, "identity restored from its Secret; no registration");
    return true;
  }

  /**
   * Writes `identity` into the Secret, under the registration the Secret names, unless it holds
   * it already (then its mark stays: an identity from an earlier pod is not the new
   * registration's); a newer version (409) is read again.
   */
  async keep(identity: HostIdentity): Promise<void> {
    for (let attempt = 1; attempt <= CONFLICT_RETRIES; attempt++) {
      const secret = await this.read();
      if (!secret) return;
      const kept = keptIn(secret);
      if (kept && kept.hostId === identity.hostId && kept.credential === identity.credential) {
        this.problem = undefined;
        return;
      }
      const wanted: Kept = {
        hostId: identity.hostId,
        credential: identity.credential,
        projectId: identity.projectId,
        registration: this.startedUnder ?? registrationOf(secret),
      };
      const next: SecretObject = { ...secret, data: encode(wanted) };
      try {
        await this.objects.replace(this.path(), next);
        this.problem = undefined;
        this.log.info(
          { hostId: wanted.hostId, registration: wanted.registration || null, secret: this.where },
          "identity kept in its Secret",
        );
        return;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 409) continue;
        this.failed("cannot be written", err);
        return;
      }
    }
    this.failed("cannot be written", new Error(`it changed under ${CONFLICT_RETRIES} updates in a row (409 Conflict)`));
  }

  private async read(): Promise<SecretObject | undefined> {
    try {
      const secret = await this.objects.get<SecretObject>(this.path());
      if (!secret) this.failed("cannot be read", new Error("it is not there (the deployment YAML creates it)"));
      return secret;
    } catch (err) {
      this.failed("cannot be read", err);
      return undefined;
    }
  }

  /** The Secret's path in the pod's namespace, which Kubernetes mounts beside the token. */
  private path(): string {
    const namespace = readFileSync(join(this.api.serviceAccountDir, "namespace"), "utf8").trim();
    return `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${IN_CLUSTER_IDENTITY_SECRET}`;
  }

  private failed(what: string, err: unknown): void {
    const problem = `the agent's identity cannot be kept: ${this.where} ${what}: ${(err as Error).message}`;
    if (problem !== this.problem) {
      this.log.warn(
        { secret: this.where, error: problem },
        "identity not kept in its Secret: a pod rescheduled elsewhere cannot link again without a new deployment YAML",
      );
    }
    this.problem = problem;
  }
}

function encode(kept: Kept): Record<string, string> {
  return Object.fromEntries(Object.entries(kept).map(([k, v]) => [k, Buffer.from(v, "utf8").toString("base64")]));
}

function keptIn(secret: SecretObject): Kept | undefined {
  const value = (key: keyof Kept) => {
    const text = secret.data?.[key];
    return text === undefined ? "" : Buffer.from(text, "base64").toString("utf8");
  };
  const kept: Kept = {
    hostId: value("hostId"),
    credential: value("credential"),
    projectId: value("projectId"),
    registration: value("registration"),
  };
  return kept.hostId && kept.credential ? kept : undefined;
}

/** The registration the Secret names now; "" without the annotation (a YAML from before it). */
function registrationOf(secret: SecretObject): string {
  return secret.metadata.annotations?.[IN_CLUSTER_REGISTRATION_ANNOTATION] ?? "";
}
