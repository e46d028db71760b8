export * from "./client.ts";
export * as schema from "./schema.ts";
export * from "./schema.ts";
export * from "./store/index.ts";
