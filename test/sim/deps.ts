/**
 * The simulator's outside dependencies in one place. The protocol comes from its package
 * sources (it is not a dependency of the repository root, where test/ lives): the simulator
 * speaks exactly what the agent speaks, never a copy.
 */
export { WebSocket, WebSocketServer } from "ws";
export * from "../../packages/protocol/src/index.ts";
