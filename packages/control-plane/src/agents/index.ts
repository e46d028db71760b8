export { CommandFailedError, CommandTimeoutError, HostOfflineError } from "./errors.ts";
export { AgentHub, type AgentHubOptions } from "./hub.ts";
