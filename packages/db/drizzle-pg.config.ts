import { defineConfig } from "drizzle-kit";

/** PostgreSQL migrations, from the PostgreSQL schema (src/pg-schema.ts). */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/pg-schema.ts",
  out: "./drizzle-pg",
});
