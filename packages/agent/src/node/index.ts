export * from "./bouncer-endpoint.ts";
export * from "./controller.ts";
export * from "./desired-state.ts";
export * from "./node-config.ts";
export * from "./reporter.ts";
