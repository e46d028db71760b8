import { createHash, randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { Backoff, type BackoffOptions } from "@keelson/protocol";
import { ControlPlanes } from "./link/control-planes.ts";
import { StateDir } from "./state-dir.ts";

/** What the agent keeps after registering; `<state dir>/identity.json`, mode 0600. */
export interface HostIdentity {
  hostId: string;
  credential: string;
  projectId: string;
  /** The control plane it registered with (informational). */
  controlPlane: string;
  registeredAt: string;
}

export const IDENTITY_FILE = "identity.json";
/**
 * The credential this agent made for a registration under way, kept until it succeeded: a
 * retry after a lost answer (or an agent restart in between) presents the same credential, and
 * the control plane answers the same host again instead of a spent join token.
 */
export const PENDING_REGISTRATION_FILE = "registration.json";

interface PendingRegistration {
  /** sha256 of the join token it is for: another token starts over with a new credential. */
  joinTokenSha256: string;
  credential: string;
}

export interface RegistrationOptions {
  /** The control plane's http(s) URL, or the replicas' (each failed try moves to the next). */
  controlPlane: string | ControlPlanes;
  stateDir: string;
  /** Needed only until the first registration succeeded. */
  joinToken?: string;
  hostname: string;
  primaryIp?: string;
  agentVersion?: string;
  /** The cloud's id of this machine, sent once at registration (an auto deploy's instances). */
  cloudInstanceId?: string;
  log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** Stops the retries of an unreachable control plane. */
  signal?: AbortSignal;
  backoff?: BackoffOptions;
  fetch?: typeof fetch;
}

/**
 * Registration failed in a way a retry cannot fix: no join token, or the control plane
 * refused it (unknown, used, expired) or the request. `code` is the control plane's error code
 * when there is one (`join_token_used`, `join_token_expired`, ...).
 */
export class RegistrationError extends Error {
  override name = "RegistrationError";
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * The host's identity: read from the state dir, or obtained once by registering with
 * KEELSON_JOIN_TOKEN. After that the join token is never needed again. An unreachable
 * control plane (network error, 5xx) is retried with backoff until `signal` aborts; a refusal
 * is final.
 */
export async function ensureRegistered(options: RegistrationOptions): Promise<HostIdentity> {
  const state = new StateDir(options.stateDir).ensure();
  const existing = readIdentity(state);
  if (existing) return existing;
  if (!options.joinToken) {
    throw new RegistrationError(
      `this host is not registered yet (no ${state.path(IDENTITY_FILE)}): start the agent once with KEELSON_JOIN_TOKEN`,
      "join_token_missing",
    );
  }
  const doFetch = options.fetch ?? fetch;
  const planes =
    typeof options.controlPlane === "string" ? new ControlPlanes([options.controlPlane]) : options.controlPlane;
  const registerUrl = () => `${planes.current.replace(/\/+$/, "")}/v1/agents/register`;
  const credential = pendingCredential(state, options.joinToken);
  const body = JSON.stringify({
    joinToken: options.joinToken,
    credential,
    hostname: options.hostname,
    ...(options.primaryIp ? { primaryIp: options.primaryIp } : {}),
    ...(options.agentVersion ? { agentVersion: options.agentVersion } : {}),
    ...(options.cloudInstanceId ? { cloudInstanceId: options.cloudInstanceId } : {}),
  });
  const backoff = new Backoff(options.backoff);
  for (;;) {
    options.signal?.throwIfAborted();
    let response: Response | undefined;
    let problem = "";
    const url = registerUrl();
    try {
      response = await doFetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      problem = `cannot reach ${url}: ${(err as Error).message}`;
    }
    if (response) {
      const answer = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      if (response.status === 201 || response.status === 200) {
        const identity = toIdentity(answer, planes.current);
        state.writeJson(IDENTITY_FILE, identity);
        rmSync(state.path(PENDING_REGISTRATION_FILE), { force: true });
        options.log?.info(
          { hostId: identity.hostId, projectId: identity.projectId },
          "registered with the control plane",
        );
        return identity;
      }
      const code = typeof answer.code === "string" ? answer.code : `http_${response.status}`;
      const message = typeof answer.message === "string" ? answer.message : `HTTP ${response.status}`;
      if (response.status < 500) {
        throw new RegistrationError(`registration refused by the control plane: ${message}`, code);
      }
      problem = `registration failed with HTTP ${response.status}: ${message}`;
    }
    const delay = backoff.next();
    // Another replica may answer: the next try goes to the next URL (one URL: the same again).
    planes.next();
    options.log?.warn({ problem, retryInMs: delay }, "registration failed; retrying");
    await sleep(delay, options.signal);
  }
}

/** The credential of the registration under way for `joinToken`, made (and kept, 0600) on first need. */
function pendingCredential(state: StateDir, joinToken: string): string {
  const joinTokenSha256 = createHash("sha256").update(joinToken).digest("hex");
  const pending = state.readJson<Partial<PendingRegistration>>(PENDING_REGISTRATION_FILE);
  if (pending?.joinTokenSha256 === joinTokenSha256 && typeof pending.credential === "string") {
    return pending.credential;
  }
  const credential = `khc_${randomBytes(32).toString("base64url")}`;
  state.writeJson(PENDING_REGISTRATION_FILE, { joinTokenSha256, credential } satisfies PendingRegistration);
  return credential;
}

export function readIdentity(state: StateDir): HostIdentity | undefined {
  const value = state.readJson<Partial<HostIdentity>>(IDENTITY_FILE);
  if (!value || typeof value.hostId !== "string" || typeof value.credential !== "string") return undefined;
  return value as HostIdentity;
}

function toIdentity(answer: Record<string, unknown>, controlPlane: string): HostIdentity {
  const { hostId, credential, projectId } = answer;
  if (typeof hostId !== "string" || typeof credential !== "string" || typeof projectId !== "string") {
    throw new RegistrationError(
      "the control plane's registration answer lacks hostId, credential or projectId",
      "bad_answer",
    );
  }
  return { hostId, credential, projectId, controlPlane, registeredAt: new Date().toISOString() };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
