/**
 * What the agent process and its launcher (upgrade/supervisor.ts) say to each other. The
 * launcher starts the agent with an IPC channel; everything else is exit codes.
 */

/** Exit code of an agent asking to be started again (after switching to a new version). */
export const RESTART_EXIT_CODE = 75;
/** Bad configuration: restarting cannot help (the systemd unit lists it in RestartPreventExitStatus). */
export const CONFIG_EXIT_CODE = 78;
/** The control plane refused this host (unknown credential, used join token, protocol mismatch). */
export const AUTH_EXIT_CODE = 77;

/** Sent by the agent once its local API listens and the control plane has welcomed it. */
export interface ReadyMessage {
  type: "keelson-agent.ready";
  version: string;
}

export function isReadyMessage(value: unknown): value is ReadyMessage {
  return typeof value === "object" && value !== null && (value as { type?: unknown }).type === "keelson-agent.ready";
}

/** Tells the launcher, if there is one, that this process came up. */
export function notifyReady(version: string): void {
  if (typeof process.send === "function" && process.connected) {
    const message: ReadyMessage = { type: "keelson-agent.ready", version };
    process.send(message);
  }
}
