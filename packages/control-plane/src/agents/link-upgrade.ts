import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { AGENT_LINK_PATH } from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import { CAPACITY_RETRY_AFTER_S, type LinkCapacity } from "./link-capacity.ts";
import type { HostAuth } from "./link-domain.ts";
import { rejectUpgrade } from "./upgrade-refusal.ts";

/** A refusal of every new link: its code in the 503's body, and the message (also the going-away reason). */
export interface LinkRefusal {
  code: "shutting_down" | "draining";
  message: string;
}

export const SHUTTING_DOWN: LinkRefusal = { code: "shutting_down", message: "the control plane is shutting down" };
export const DRAINING: LinkRefusal = {
  code: "draining",
  message: "this control-plane replica is draining: link to another replica",
};

export type UpgradeHandler = (request: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface UpgradeGateOptions {
  log: FastifyBaseLogger;
  capacity: LinkCapacity;
  authenticate(headers: IncomingMessage["headers"]): Promise<HostAuth>;
  /** Agent links open now (helloed or not). */
  open(): number;
  /** Why links are refused now (the server stops, or this replica drains); undefined: admitted. */
  closedTo(): LinkRefusal | undefined;
  /** A peer whose credential was accepted: complete the upgrade. */
  admit(request: IncomingMessage, socket: Duplex, head: Buffer, auth: Extract<HostAuth, { ok: true }>): void;
}

/**
 * The one `upgrade` listener of the control plane's server: the agent link's admission (path,
 * drain, link ceiling, credential, all before a WebSocket exists) and the other WebSocket
 * endpoints served on the same listener (the web CLI), so an unknown path still gets its 404.
 */
export class UpgradeGate {
  private readonly others = new Map<string, UpgradeHandler>();
  private server: Server | undefined;

  constructor(private readonly options: UpgradeGateOptions) {}

  serve(path: string, handler: UpgradeHandler): void {
    this.others.set(path, handler);
  }

  attach(server: Server): void {
    this.server = server;
    server.on("upgrade", this.onUpgrade);
  }

  detach(): void {
    this.server?.off("upgrade", this.onUpgrade);
  }

  private readonly onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const { log, capacity } = this.options;
    const path = (request.url ?? "").split("?")[0] ?? "";
    const other = this.others.get(path);
    if (other) {
      other(request, socket, head);
      return;
    }
    if (path !== AGENT_LINK_PATH) {
      // Other upgrade listeners may serve other paths; answer only if nobody else will.
      if (this.server?.listenerCount("upgrade") === 1)
        rejectUpgrade(socket, 404, "not_found", `no WebSocket endpoint at ${path}`);
      return;
    }
    const closed = this.options.closedTo();
    if (closed) {
      rejectUpgrade(socket, 503, closed.code, closed.message);
      return;
    }
    const open = this.options.open();
    if (!capacity.admits(open)) {
      log.warn({ open, limit: capacity.limit }, "agent link refused: at the link ceiling");
      rejectUpgrade(
        socket,
        503,
        "link_capacity",
        `the control plane holds ${open} agent links, its ceiling; retry later`,
        {
          "Retry-After": String(CAPACITY_RETRY_AFTER_S),
        },
      );
      return;
    }
    // Authenticate before completing the upgrade: an unknown peer never gets a socket.
    this.options.authenticate(request.headers).then(
      (auth) => {
        if (!auth.ok) {
          log.warn({ code: auth.code, remote: request.socket.remoteAddress }, "agent link refused");
          rejectUpgrade(socket, auth.status, auth.code, auth.message);
          return;
        }
        if (socket.destroyed || this.options.closedTo()) return;
        this.options.admit(request, socket, head, auth);
      },
      (err: unknown) => {
        log.error({ err }, "could not check an agent's credential");
        rejectUpgrade(socket, 503, "unavailable", "the control plane could not check the credential; retry later", {
          "Retry-After": String(CAPACITY_RETRY_AFTER_S),
        });
      },
    );
  };
}
