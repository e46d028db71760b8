import { ApiError } from "../http/errors.ts";

/**
 * Failures of a command sent to an agent. They are ApiErrors so a route relaying a command can
 * let them through and the client gets a JSON error with a fitting status.
 */

/** The host has no live link: nothing can be relayed to it now. */
export class HostOfflineError extends ApiError {
  constructor(
    readonly hostId: string,
    why = "its agent is not connected",
  ) {
    super(409, "host_offline", `host ${hostId} is offline: ${why}`);
    this.name = "HostOfflineError";
  }
}

/** No result arrived within the command's timeout (the agent may still be working on it). */
export class CommandTimeoutError extends ApiError {
  constructor(
    readonly hostId: string,
    readonly commandName: string,
    readonly timeoutMs: number,
  ) {
    super(504, "agent_timeout", `host ${hostId} did not answer ${commandName} within ${timeoutMs} ms`);
    this.name = "CommandTimeoutError";
  }
}

/** The agent answered with `ok: false` (or with a result its command's schema refuses). */
export class CommandFailedError extends ApiError {
  constructor(
    readonly hostId: string,
    readonly commandName: string,
    readonly agentCode: string,
    agentMessage: string,
  ) {
    super(502, "agent_command_failed", `host ${hostId} failed ${commandName}: ${agentCode}: ${agentMessage}`);
    this.name = "CommandFailedError";
  }
}
