import type { CommandFrame, ControlFrame } from "@keelson/protocol";
import { closeReason, encodeFrame } from "@keelson/protocol";
import { WebSocket } from "ws";

let nextSessionId = 1;

const NO_CAPABILITIES: ReadonlySet<string> = new Set();

/**
 * A link's WebSocket (the hub's server creates these: its `WebSocket` option), pointing at its
 * session so that one set of listeners serves every link: each listener finds the session on
 * the socket it is called on, and a link holds no closures of its own (thousands of links).
 */
export class AgentSocket extends WebSocket {
  session: AgentSession | undefined = undefined;
}

/** The session of a socket the hub's server made (undefined until the hub made one for it). */
export function sessionOf(ws: WebSocket): AgentSession | undefined {
  return (ws as AgentSocket).session;
}

/** Command ids a session remembers having sent (sendCommand). */
const COMMANDS_REMEMBERED = 256;

/**
 * One authenticated agent connection. A hub holds thousands for hours, so a session keeps only
 * what the link needs between frames: no Date, no timer once helloed, no settled promise, and
 * its capability set shared with every agent that declared the same list.
 */
export class AgentSession {
  /** For logs: tells apart the sockets of one host across reconnects. */
  readonly id = nextSessionId++;
  /** Set once the hello was accepted; until then the session is not in the registry. */
  helloed = false;
  /** Pings sent since the last pong. */
  missedPongs = 0;
  /** Until the hello: the timer that closes a link that sends none. */
  helloTimer: NodeJS.Timeout | undefined;
  /** What the agent declared in its hello (AGENT_CAPABILITIES); empty for an agent older than the field. */
  capabilities: ReadonlySet<string> = NO_CAPABILITIES;
  /** The link's epoch in agent_links (link-book.ts); undefined until recorded, or if it could not be. */
  epoch: number | undefined;
  /** The frames being handled, one after another (enqueue); undefined while none is. */
  private inbox: Promise<void> | undefined;
  /** Ids of the commands sent on this link (sendCommand); undefined until the first. */
  private commandsSent: Set<string> | undefined;

  constructor(
    readonly socket: AgentSocket,
    readonly hostId: string,
    readonly projectId: string,
  ) {
    socket.session = this;
  }

  get open(): boolean {
    return this.socket.readyState === this.socket.OPEN;
  }

  send(frame: ControlFrame): boolean {
    if (!this.open) return false;
    this.socket.send(encodeFrame(frame));
    return true;
  }

  /** Sends a command, remembering that this link carried it (see `sendCommandUnlessCarried`). */
  sendCommand(frame: CommandFrame): boolean {
    if (!this.send(frame)) return false;
    this.commandsSent ??= new Set();
    this.commandsSent.add(frame.id);
    // Bounded: the oldest ids go first (a Set iterates in insertion order); commands of a link
    // are answered or expired long before this many more were sent on it.
    if (this.commandsSent.size > COMMANDS_REMEMBERED) {
      this.commandsSent.delete(this.commandsSent.values().next().value as string);
    }
    return true;
  }

  /**
   * Sends a command unless this link already carried it: what a link that just came up is
   * given again (its host's unanswered commands) may include one a wake-up sent on it a moment
   * before, and an agent must not get it twice. A new link is a new session and gets them all.
   */
  sendCommandUnlessCarried(frame: CommandFrame): boolean {
    return this.commandsSent?.has(frame.id) ? false : this.sendCommand(frame);
  }

  /**
   * Runs `handle` once the frames before it were handled: one frame at a time per link, in
   * arrival order (a node's reports must be stored in the order it sent them, and handling a
   * frame may wait for the database).
   */
  enqueue(handle: () => Promise<void>, onError: (err: unknown) => void): void {
    const handled = (this.inbox ?? Promise.resolve()).then(handle).catch(onError);
    this.inbox = handled;
    // An idle link holds no settled promise (thousands of links, each idle most of the time).
    void handled.then(() => {
      if (this.inbox === handled) this.inbox = undefined;
    });
  }

  close(code: number, reason: string): void {
    if (this.socket.readyState === this.socket.CLOSED) return;
    this.socket.close(code, closeReason(reason));
  }
}

/** Capability lists seen in hellos beyond this many get a set of their own each (a bound on the cache). */
const SHARED_CAPABILITY_LISTS = 64;

/**
 * One read-only set per distinct capability list: a fleet of one agent version declares one
 * list, and 15,000 sessions share its set.
 */
export class CapabilitySets {
  private readonly byList = new Map<string, ReadonlySet<string>>();

  of(list: readonly string[]): ReadonlySet<string> {
    if (list.length === 0) return NO_CAPABILITIES;
    const key = list.join("\n");
    let set = this.byList.get(key);
    if (!set) {
      set = new Set(list);
      if (this.byList.size < SHARED_CAPABILITY_LISTS) this.byList.set(key, set);
    }
    return set;
  }
}

/**
 * The current session of each host. A reconnect replaces the old session; the old socket's
 * `close` event, which can fire after the new session registered, removes the entry only if
 * it still points at that very session object (the stale-socket guard).
 */
export class SessionRegistry<S extends { hostId: string } = AgentSession> {
  private readonly byHost = new Map<string, S>();

  /** Makes `session` current for its host; returns the session it replaced, if any. */
  replace(session: S): S | undefined {
    const previous = this.byHost.get(session.hostId);
    this.byHost.set(session.hostId, session);
    return previous === session ? undefined : previous;
  }

  /** Removes `session` if it is still its host's current one; false for a stale socket. */
  removeIfCurrent(session: S): boolean {
    if (this.byHost.get(session.hostId) !== session) return false;
    this.byHost.delete(session.hostId);
    return true;
  }

  get(hostId: string): S | undefined {
    return this.byHost.get(hostId);
  }

  get size(): number {
    return this.byHost.size;
  }

  values(): IterableIterator<S> {
    return this.byHost.values();
  }
}
