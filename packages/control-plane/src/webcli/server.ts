import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { rejectUpgrade } from "../agents/upgrade-refusal.ts";
import type { Keelson } from "../context.ts";
import { issueKubeconfig } from "../domain/kubeconfig/kubeconfig.ts";
import { releaseWebCliToken, spendWebCliToken } from "../domain/webcli/spent-tokens.ts";
import { verifyWebCliToken, type WebCliClaims } from "../domain/webcli/tokens.ts";
import { ApiError } from "../http/errors.ts";
import { encodeServerFrame, MAX_CLIENT_FRAME_BYTES, parseClientFrame, WEBCLI_PATH } from "./frames.ts";
import { WebCliSession } from "./session.ts";

/** How long a new connection may take to send its auth frame. */
export const AUTH_TIMEOUT_MS = 10_000;

/**
 * `GET /v1/webcli/session` (README "Web CLI"): the WebSocket the console's terminal talks to.
 * A browser cannot set headers on a WebSocket, so the web CLI token comes in the first frame;
 * it is the only credential taken here (an X-Auth-Token grants nothing). A token opens one
 * session on any replica: it is spent in the database (spent-tokens.ts) before the session is
 * opened, and given back when the session fails to open, that is when the server cannot send
 * `ready`: the cluster has no API endpoint yet or is gone, the session's directory cannot be
 * made, the store fails, or the socket closed first. Once `ready` is sent it stays spent.
 * `?cluster=<uuid>`, when given, must be the token's cluster.
 */
export class WebCliServer {
  private readonly wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: 4 * MAX_CLIENT_FRAME_BYTES,
    perMessageDeflate: false,
  });
  private readonly sockets = new Set<WebSocket>();
  private readonly sessions = new Set<WebCliSession>();
  private closing = false;

  constructor(
    private readonly keelson: Keelson,
    private readonly options: { authTimeoutMs?: number } = {},
  ) {}

  readonly onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (this.closing) {
      rejectUpgrade(socket, 503, "shutting_down", "the control plane is shutting down");
      return;
    }
    if (request.method !== "GET") {
      rejectUpgrade(socket, 405, "method_not_allowed", `${WEBCLI_PATH} takes GET`);
      return;
    }
    const cluster = new URL(request.url ?? "", "http://x").searchParams.get("cluster");
    this.wss.handleUpgrade(request, socket, head, (ws) => this.onConnection(ws, cluster));
  };

  private onConnection(ws: WebSocket, expectedCluster: string | null): void {
    this.sockets.add(ws);
    let session: WebCliSession | undefined;
    let authorising = false;
    let sessionTimer: NodeJS.Timeout | undefined;
    const fail = (code: string, message: string) => {
      if (ws.readyState === ws.OPEN) {
        ws.send(encodeServerFrame({ type: "error", code, message }));
        ws.close(code === "bad_frame" ? 1008 : 1000, code);
      }
    };
    const authTimer = setTimeout(
      () => fail("auth_timeout", `no auth frame within ${this.options.authTimeoutMs ?? AUTH_TIMEOUT_MS} ms`),
      this.options.authTimeoutMs ?? AUTH_TIMEOUT_MS,
    );
    ws.on("message", (data: Buffer, isBinary) => {
      const parsed = parseClientFrame(data, isBinary);
      if (!parsed.ok) return fail("bad_frame", parsed.message);
      const frame = parsed.frame;
      if (!session) {
        if (authorising) return fail("bad_frame", "wait for ready before sending more frames");
        if (frame.type !== "auth") return fail("bad_frame", `the first frame must be auth, not ${frame.type}`);
        authorising = true;
        clearTimeout(authTimer);
        let spent: WebCliClaims | undefined;
        this.authorise(frame.token, expectedCluster, (claims) => {
          spent = claims;
        })
          .then(async ({ claims, kubeconfig }) => {
            if (ws.readyState !== ws.OPEN) return void (await this.release(claims));
            const opened = await WebCliSession.open(ws, kubeconfig, this.keelson.settings, this.keelson.log);
            // Closed while the directory was made: the close handler saw no session to end.
            if (ws.readyState !== ws.OPEN) {
              await opened.close();
              return void (await this.release(claims));
            }
            session = opened;
            this.sessions.add(session);
            sessionTimer = setTimeout(
              () =>
                fail(
                  "session_expired",
                  `the session reached its limit of ${this.keelson.settings.webcliSessionTimeoutMs} ms`,
                ),
              this.keelson.settings.webcliSessionTimeoutMs,
            );
            sessionTimer.unref();
            session.send({ type: "ready", cluster: claims.clusterId });
          })
          // Refused tokens, and a session that could not be opened: an error frame, never a crash.
          .catch(async (err: unknown) => {
            if (spent) await this.release(spent);
            if (err instanceof ApiError) return fail(err.code, err.message);
            this.keelson.log.error({ err }, "web CLI: opening a session failed");
            fail("unavailable", "the session could not be opened; try again");
          });
        return;
      }
      if (frame.type === "auth") return fail("bad_frame", "auth may be sent only once");
      if (frame.type === "resize") return session.resize(frame.cols);
      const current = session;
      current.input(frame.data).then(
        (end) => {
          if (end) ws.close(1000, "exit");
        },
        (err: unknown) => {
          this.keelson.log.error({ err }, "web CLI: a command failed to run");
          fail("unavailable", "the command could not be run");
        },
      );
    });
    ws.on("error", (err) => this.keelson.log.debug({ err }, "web CLI socket error"));
    ws.on("close", () => {
      clearTimeout(authTimer);
      clearTimeout(sessionTimer);
      this.sockets.delete(ws);
      if (session) void this.end(session);
    });
  }

  private async end(session: WebCliSession): Promise<void> {
    this.sessions.delete(session);
    await session.close().catch((err: unknown) => this.keelson.log.warn({ err }, "web CLI: cleaning a session failed"));
  }

  /** Gives a token back whose session did not open; a failure here leaves it spent (logged). */
  private async release(claims: WebCliClaims): Promise<void> {
    await releaseWebCliToken(this.keelson.db, claims.jti).catch((err: unknown) =>
      this.keelson.log.warn({ err }, "web CLI: a token whose session did not open stays spent"),
    );
  }

  /**
   * The token's claims and a kubeconfig for its session, or an ApiError saying why not. The
   * token is spent (`onSpent`) before the kubeconfig's credential is issued, so two sockets
   * with one token never both get one.
   */
  private async authorise(
    token: string,
    expectedCluster: string | null,
    onSpent: (claims: WebCliClaims) => void,
  ): Promise<{ claims: WebCliClaims; kubeconfig: string }> {
    const now = new Date();
    const claims = verifyWebCliToken(this.keelson.webcliKey, token, now);
    if (!claims)
      throw new ApiError(401, "invalid_token", "the web CLI token is not valid or has expired; ask for a new one");
    if (expectedCluster !== null && expectedCluster !== claims.clusterId) {
      throw new ApiError(
        403,
        "wrong_cluster",
        `the web CLI token is for cluster ${claims.clusterId}, not ${expectedCluster}`,
      );
    }
    if (!(await spendWebCliToken(this.keelson.db, claims, now))) {
      throw new ApiError(401, "token_used", "this web CLI token already opened a session; ask for a new one");
    }
    onSpent(claims);
    const { yaml } = await issueKubeconfig(this.keelson, {
      projectId: claims.projectId,
      clusterId: claims.clusterId,
      subject: claims.subject,
      forceCertAuth: false,
      // The credential lasts as long as the session may (it is deleted with the session's directory sooner).
      validHours: this.keelson.settings.webcliSessionTimeoutMs / 3_600_000,
    });
    return { claims, kubeconfig: yaml };
  }

  /** Ends every session (shutdown): their commands are killed and their directories removed. */
  async close(): Promise<void> {
    this.closing = true;
    for (const ws of this.sockets) {
      if (ws.readyState === ws.OPEN)
        ws.send(
          encodeServerFrame({ type: "error", code: "shutting_down", message: "the control plane is shutting down" }),
        );
      ws.terminate();
    }
    await Promise.all([...this.sessions].map((s) => this.end(s)));
    this.wss.close();
  }
}
