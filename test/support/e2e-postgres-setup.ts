/**
 * vitest setupFiles of the e2e-postgres project: the end-to-end suite again, every keelson-server
 * it starts on a PostgreSQL database of its own (one per data dir, so a restart finds its data).
 */
import { runServersOnPostgres } from "../e2e/support/processes.ts";
import { databaseFor } from "./postgres-database.ts";

runServersOnPostgres(databaseFor);
