import { ApiRefusal, CliError, EXIT } from "./errors.ts";
import { type EventStream, openEvents, retryable } from "./events.ts";
import { elapsed } from "./output.ts";
import { type Operation, OperationProgress } from "./progress.ts";
import type { Cli, Session } from "./session.ts";

/**
 * Commands that start an operation: subscribe to the events stream first, send the request,
 * find the operation it started, then follow it with a live display until it ends (exit 0 when
 * it succeeded, 1 naming the failure). `--no-wait` prints the operation id and returns.
 * Ctrl-C stops watching only; the operation goes on on the server.
 */

/** How often the operation's state is read back, in case the stream missed its end. */
const POLL_MS = 2000;

export const listOperations = (s: Session, query: { target?: string; state?: string; limit?: number } = {}) =>
  s.api.get<Operation[]>(`/v4/${s.projectId}/operations`, { limit: 100, ...query });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One operation by uuid or unique uuid prefix. */
export async function findOperation(s: Session, ref: string, target?: string): Promise<Operation> {
  // A whole uuid is read by itself (GET /v1/operations/{uuid}), however old; a prefix is looked
  // up among the newest operations.
  if (UUID.test(ref)) {
    try {
      const op = await s.api.get<Operation>(`/v1/operations/${ref}`);
      if (op.projectId === s.projectId && (!target || op.targetUuid === target)) return op;
    } catch (error) {
      if (!(error instanceof ApiRefusal && error.status === 404)) throw error;
    }
    throw new CliError(`no operation "${ref}" in this project`);
  }
  const ops = await listOperations(s, { limit: 1000, ...(target ? { target } : {}) });
  const exact = ops.find((op) => op.uuid === ref);
  if (exact) return exact;
  const prefixed = ref.length >= 4 ? ops.filter((op) => op.uuid.startsWith(ref)) : [];
  if (prefixed.length === 1) return prefixed[0] as Operation;
  throw new CliError(`no operation "${ref}" in this project`);
}

export interface StartOptions {
  wait: boolean;
  /** The target known before the request (a cluster); a create names it in its answer. */
  targetId?: string;
  /** Sends the request; returns the target's id. */
  start(): Promise<string>;
  /** What was asked, for the messages: "restart of cluster demo". */
  what: string;
  /** How the target is called in the progress display ("cluster demo"). */
  targetLabel?: string;
}

/**
 * An operation on a cluster the command already found: `send` makes the request, and the
 * operation it starts is followed (or its id printed, `wait` false). `what` reads "restart of".
 */
export function startClusterOperation(
  cli: Cli,
  s: Session,
  cluster: { uuid: string; name: string },
  wait: boolean,
  what: string,
  send: () => Promise<unknown>,
): Promise<void> {
  return startOperation(cli, s, {
    wait,
    targetId: cluster.uuid,
    targetLabel: `cluster ${cluster.name}`,
    what: `${what} cluster ${cluster.name}`,
    start: async () => {
      await send();
      return cluster.uuid;
    },
  });
}

export async function startOperation(cli: Cli, s: Session, options: StartOptions): Promise<void> {
  const stream = options.wait ? await openEvents(cli, s) : undefined;
  try {
    const before = options.targetId ? await listOperations(s, { target: options.targetId, limit: 50 }) : [];
    const known = new Set(before.map((op) => op.uuid));
    const targetId = await options.start();
    const op = (await listOperations(s, { target: targetId, limit: 50 })).find((o) => !known.has(o.uuid));
    if (!op) {
      cli.out.print(`${options.what}: accepted (no operation was needed)`);
      return;
    }
    if (!stream) {
      cli.out.print(op.uuid);
      cli.out.note(
        `${options.what}: operation ${op.uuid} started; follow it with: keelson operations watch ${op.uuid}`,
      );
      return;
    }
    await follow(cli, s, op, stream, options.targetLabel);
  } finally {
    stream?.close();
  }
}

/**
 * Subscribes, then sends a request whose answer names the operation it started (`start`
 * returns its id), and follows it: the stream is open before the request, so no event is lost.
 */
export async function startAndFollow(cli: Cli, s: Session, start: () => Promise<string>): Promise<void> {
  const stream = await openEvents(cli, s);
  try {
    const id = await start();
    await follow(cli, s, await findOperation(s, id), stream);
  } finally {
    stream.close();
  }
}

/** `operations watch`: follows an operation that is already there. */
export async function watchOperation(cli: Cli, s: Session, ref: string): Promise<void> {
  const stream = await openEvents(cli, s);
  try {
    await follow(cli, s, await findOperation(s, ref), stream);
  } finally {
    stream.close();
  }
}

async function follow(cli: Cli, s: Session, first: Operation, stream: EventStream, label?: string): Promise<void> {
  const { out } = cli;
  const names = await nodeNames(s);
  const progress = new OperationProgress(first, names);
  const target = label ?? (await targetName(s, first));
  const started = Date.now();
  const since = () => elapsed(Date.now() - (Date.parse(first.startedAt ?? first.createdAt) || started));
  let op = first;
  let drawn = 0;
  const header = () => {
    const text = `${op.kind} ${op.uuid.slice(0, 8)} on ${target}: ${op.state}${progress.step ? ` (done: ${progress.step})` : ""}  ${since()}`;
    const width = out.columns();
    return out.colour.bold(text.length > width ? `${text.slice(0, width - 1)}…` : text);
  };
  const redraw = () => {
    if (!out.tty) return;
    const lines = [header(), ...progress.lines(Date.now(), out.colour, out.columns())];
    out.note(`${drawn > 0 ? `\x1b[${drawn}A\x1b[0J` : ""}${lines.join("\n")}`);
    drawn = lines.length;
  };
  const isEnd = (o: Operation) => o.state === "succeeded" || o.state === "failed";
  let ticker: NodeJS.Timeout | undefined;
  let poller: NodeJS.Timeout | undefined;
  // Ctrl-C is caught before anything is shown: whoever reacts to the first line must not kill the process.
  let interrupted: (() => void) | undefined;
  let stopInterrupt = cli.io.onInterrupt(() => interrupted?.());
  const stopAll = () => {
    clearInterval(ticker);
    clearInterval(poller);
    stopInterrupt();
    stream.close();
  };
  if (out.tty) {
    // A note of the stream (dropped, resumed) goes above the display, which is drawn again below it.
    stream.note = (text) => {
      out.note(text);
      drawn = 0;
    };
    redraw();
  } else out.note(`following ${op.kind} ${op.uuid} on ${target} (${op.state})`);
  const finished = new Promise<Operation>((resolve, reject) => {
    if (isEnd(first)) return resolve(first);
    ticker = setInterval(redraw, 1000);
    // The state is also read back now and then, in case the operation ended while the stream
    // was down or its events were lost. A poll that cannot reach the server passes: whether to
    // give up is the stream's to say (it reconnects for --reconnect-timeout-ms).
    const poll = async () => {
      try {
        const now = await findOperation(s, op.uuid, op.targetUuid);
        op = now;
        if (isEnd(now)) resolve(now);
      } catch (error) {
        if (!retryable(error)) reject(error);
      }
    };
    poller = setInterval(() => void poll(), POLL_MS);
    interrupted = () => {
      stopInterrupt();
      stopInterrupt = () => {};
      out.note(
        `\nstopped watching; operation ${op.uuid} goes on on the server (keelson operations watch ${op.uuid} to follow it again)`,
      );
      reject(new CliError("interrupted", EXIT.interrupted));
    };
    void stream
      .events((event) => {
        if (event.name === "events.lost") {
          // The server no longer holds the events missed while the stream was down: say so, read the state.
          out.note(`events were lost while the stream was down (${String(event.data.message ?? "")})`);
          void poll();
          return;
        }
        const lines = progress.apply(event, Date.now());
        if (event.data.operationId === op.uuid && typeof event.data.state === "string") {
          op = { ...op, state: event.data.state as Operation["state"] };
        }
        if (event.name === "operation.finished" && event.data.operationId === op.uuid) void poll();
        if (out.tty) redraw();
        else for (const line of lines) out.note(`${since().padStart(7)}  ${line}`);
      })
      .then(() => poll(), reject);
  }).finally(stopAll);

  const final = await finished;
  op = final;
  redraw();
  const took =
    final.startedAt && final.finishedAt
      ? ` in ${elapsed(Date.parse(final.finishedAt) - Date.parse(final.startedAt))}`
      : "";
  if (final.state === "succeeded") {
    out.print(`${out.colour.green("succeeded")}: ${final.kind} ${final.uuid}${took}`);
    return;
  }
  throw new CliError(`${final.kind} ${final.uuid} failed${took}: ${final.error ?? "no reason given"}`, EXIT.failed);
}

/** "cluster demo", or the target's uuid when it is not a cluster that is still there. */
async function targetName(s: Session, op: Operation): Promise<string> {
  if (!op.kind.startsWith("cluster.")) return op.targetUuid;
  try {
    const cluster = await s.api.get<{ name: string }>(`/v4/${s.projectId}/clusters/${op.targetUuid}`);
    return `cluster ${cluster.name}`;
  } catch {
    return `cluster ${op.targetUuid}`;
  }
}

async function nodeNames(s: Session): Promise<Map<string, { name: string; isMaster: boolean }>> {
  const nodes = await s.api.get<{ uuid: string; name: string; isMaster: number }[]>(`/v4/${s.projectId}/nodes`);
  return new Map(nodes.map((n) => [n.uuid, { name: n.name, isMaster: n.isMaster === 1 }]));
}
