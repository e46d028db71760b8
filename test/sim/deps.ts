/**
 * The simulator's outside dependencies in one place. The protocol comes from its package
 * sources (it is not a dependency of the repository root, where test/ lives): the simulator
 * speaks exactly what the agent speaks, never a copy, and trusts the control plane's TLS with
 * the agent's own trust code.
 */
export { type ClientOptions, WebSocket, WebSocketServer } from "ws";
export { ControlPlanes } from "../../packages/agent/src/link/control-planes.ts";
export { strangerPin } from "../../packages/agent/src/link/pins.ts";
export {
  ControlPlaneTrust,
  establishTrust,
  isCertificateError,
  TrustError,
} from "../../packages/agent/src/link/trust.ts";
export * from "../../packages/protocol/src/index.ts";
