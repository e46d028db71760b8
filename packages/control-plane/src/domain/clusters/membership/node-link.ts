import { setMaxListeners } from "node:events";
import type { CommandName, CommandPayload, CommandResult } from "@keelson/protocol";
import { MAX_COMMAND_TIMEOUT_MS } from "@keelson/protocol";
import type { CommandIssuer } from "../../../agents/command-relay.ts";
import { CommandFailedError, CommandTimeoutError, HostOfflineError } from "../../../agents/errors.ts";
import type { AgentHub } from "../../../agents/hub.ts";
import type { NodeEvent } from "../../../agents/node-events.ts";
import { OperationInterrupted, type StepContext } from "../../../runner/types.ts";

/**
 * Talking to one node from inside an operation step: commands that wait for an offline host to
 * come back (within a deadline), and waits for a node's reported state. Both wake on the hub's
 * node events, never by polling, and both give up with OperationInterrupted as soon as the
 * control plane shuts down, so the step re-runs after the restart.
 */

/** The agent answered a command with an error; `agentCode` is the protocol's CommandErrorCode. */
export class NodeCommandFailed extends Error {
  constructor(
    message: string,
    readonly agentCode: string,
  ) {
    super(message);
    this.name = "NodeCommandFailed";
  }
}

/** The node's agent did not do what was asked in time (offline, slow, or stuck). */
export class NodeDeadlineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NodeDeadlineError";
  }
}

export interface Deadline {
  /** Epoch ms. */
  at: number;
  signal: AbortSignal;
}

/** A command of an operation's step: its stable id, and the claim it is sent under. */
export interface StepCommand {
  id: string;
  issuer: CommandIssuer;
}

/**
 * The command `name` of a step to `hostId`, with an id stable across restarts and replicas (the
 * agent runs an id once; a former owner's copy is never sent: command-relay.ts). `suffix` tells
 * apart a deliberate second sending of it.
 */
export function stepCommand(
  ctx: Pick<StepContext, "op" | "fence">,
  hostId: string,
  name: CommandName,
  suffix = "",
): StepCommand {
  return { id: `${ctx.op.id}:${hostId}:${name}${suffix}`, issuer: { operationId: ctx.op.id, fence: ctx.fence } };
}

function remaining(deadline: Deadline): number {
  return deadline.at - Date.now();
}

/**
 * Resolves when `subscribe`'s callback calls `done`, or rejects on the deadline (with
 * `onTimeout()`) or on shutdown (OperationInterrupted). `subscribe` returns its unsubscribe.
 */
function waitUntil<T>(
  deadline: Deadline,
  subscribe: (done: (value: T) => void, fail: (err: Error) => void) => () => void,
  onTimeout: () => Error | Promise<Error>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (deadline.signal.aborted) {
      reject(new OperationInterrupted());
      return;
    }
    let settled = false;
    let unsubscribe: () => void = () => undefined;
    const finish = (action: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      deadline.signal.removeEventListener("abort", onAbort);
      unsubscribe();
      action();
    };
    const onAbort = () => finish(() => reject(new OperationInterrupted()));
    // A worker batch waits on one shutdown signal per node: a thousand listeners is expected.
    setMaxListeners(0, deadline.signal);
    // The timeout's error may read the node's row to say where it is: it is settled once ready.
    const timer = setTimeout(
      () => {
        Promise.resolve()
          .then(onTimeout)
          .then(
            (err) => finish(() => reject(err)),
            (err: unknown) => finish(() => reject(err)),
          );
      },
      Math.max(0, remaining(deadline)),
    );
    deadline.signal.addEventListener("abort", onAbort, { once: true });
    unsubscribe = subscribe(
      (value) => finish(() => resolve(value)),
      (err) => finish(() => reject(err)),
    );
    // subscribe may have settled synchronously, before `unsubscribe` was assigned.
    if (settled) unsubscribe();
  });
}

/**
 * Sends a command to a host and returns its result. An offline host is waited for (its
 * reconnect is an event) until the deadline; a link that drops after sending needs nothing
 * here: the hub re-delivers the command, same id, when the host reconnects.
 */
export async function sendWhenOnline<N extends CommandName>(
  hub: AgentHub,
  hostId: string,
  name: N,
  payload: CommandPayload<N>,
  deadline: Deadline,
  describe: string,
  /** The command's stable id and its step (stepCommand): a repeat, after a restart or from another replica, is safe. */
  command: StepCommand,
): Promise<CommandResult<N>> {
  for (;;) {
    if (deadline.signal.aborted) throw new OperationInterrupted();
    const left = remaining(deadline);
    if (left <= 0) throw new NodeDeadlineError(`${describe}: its agent did not answer ${name} in time`);
    if (hub.isConnected(hostId)) {
      const sent = hub.sendCommand(hostId, name, payload, {
        timeoutMs: Math.min(left, MAX_COMMAND_TIMEOUT_MS),
        id: command.id,
        issuer: command.issuer,
      });
      // The command may settle after an abort made us stop listening; never leave it unhandled.
      sent.catch(() => undefined);
      try {
        return await waitUntil<CommandResult<N>>(
          deadline,
          (done, fail) => {
            sent.then(done, fail);
            return () => undefined;
          },
          () => new NodeDeadlineError(`${describe}: its agent did not answer ${name} in time`),
        );
      } catch (err) {
        if (err instanceof OperationInterrupted) throw err;
        if (err instanceof HostOfflineError) {
          // Offline although the session looks open: the hub is draining for a shutdown.
          if (hub.isConnected(hostId)) throw new OperationInterrupted();
          // Raced with a disconnect: wait for the reconnect below.
          continue;
        }
        if (err instanceof CommandTimeoutError) {
          throw new NodeDeadlineError(`${describe}: its agent did not answer ${name} within ${err.timeoutMs} ms`);
        }
        if (err instanceof CommandFailedError) {
          throw new NodeCommandFailed(
            `${describe}: ${name} failed on the host: ${err.agentCode}: ${agentMessage(err)}`,
            err.agentCode,
          );
        }
        throw err;
      }
    }
    await waitUntil<void>(
      deadline,
      (done) => {
        if (hub.isConnected(hostId)) {
          done();
          return () => undefined;
        }
        return hub.nodeEvents.on(hostId, (event) => {
          if (event.type === "link" && event.connected) done();
        });
      },
      () => new NodeDeadlineError(`${describe}: its agent is offline and did not reconnect in time`),
    );
  }
}

/** The agent's own words from a CommandFailedError ("host X failed cmd: CODE: message"). */
function agentMessage(err: CommandFailedError): string {
  const marker = `${err.agentCode}: `;
  const at = err.message.indexOf(marker);
  return at >= 0 ? err.message.slice(at + marker.length) : err.message;
}

export interface ObservedNode {
  clusterId: string | null;
  status: string;
  apiResponding: boolean;
  phases: unknown[];
}

/** What a waiter decides about a node's state: keep waiting (undefined), done, or failed. */
export type Verdict<T> = undefined | { done: T } | { failed: Error };

/**
 * Waits until `judge` decides on the node's state: first on its stored row (a report may have
 * arrived before the wait began), then on each report as it is stored.
 */
export function waitForNode<T>(
  hub: AgentHub,
  hostId: string,
  read: () => Promise<ObservedNode | undefined>,
  judge: (node: ObservedNode | undefined) => Verdict<T>,
  deadline: Deadline,
  onTimeout: () => Error | Promise<Error>,
): Promise<T> {
  return waitUntil<T>(
    deadline,
    (done, fail) => {
      const apply = (verdict: Verdict<T>): boolean => {
        if (!verdict) return false;
        if ("done" in verdict) done(verdict.done);
        else fail(verdict.failed);
        return true;
      };
      // Listen first, then read the stored row: a report stored while the read is on its way
      // is not missed (whichever decides first wins; waitUntil settles once).
      const unsubscribe = hub.nodeEvents.on(hostId, (event: NodeEvent) => {
        if (event.type !== "node-report") return;
        apply(
          judge({
            clusterId: event.clusterId,
            status: event.report.status,
            apiResponding: event.apiResponding,
            phases: event.report.phases,
          }),
        );
      });
      read().then((node) => apply(judge(node)), fail);
      return unsubscribe;
    },
    onTimeout,
  );
}
