export { SimAgent, type SimBehaviour } from "./agent.ts";
export { type SimMembership, simPhases, simReport } from "./node.ts";
export { type JoinTokenSource, registerFleet, type SimIdentity } from "./register.ts";
export { type Simulator, type SimulatorOptions, startSimulator } from "./simulator.ts";
