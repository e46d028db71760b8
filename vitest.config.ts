import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["packages/*/test/**/*.test.ts", "test/repo/**/*.test.ts"],
          // One real PostgreSQL server per run, for the store's tests on that dialect.
          globalSetup: ["test/support/postgres-global-setup.ts"],
          provide: { storeDialect: "sqlite" },
          testTimeout: 20_000,
        },
      },
      {
        // The control plane's tests again, every test app on a PostgreSQL database of its own.
        test: {
          name: "unit-postgres",
          include: ["packages/control-plane/test/**/*.test.ts"],
          globalSetup: ["test/support/postgres-global-setup.ts"],
          provide: { storeDialect: "postgres" },
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          // Two replicas on one database: PostgreSQL only (SQLite serves one server).
          exclude: [
            "test/e2e/replica-paused.test.ts",
            "test/e2e/replica-failover.test.ts",
            "test/e2e/replicas-rolling-upgrade.test.ts",
          ],
          globalSetup: ["test/support/postgres-global-setup.ts", "test/support/server-bundle-setup.ts"],
          provide: { storeDialect: "sqlite" },
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
      {
        // The end-to-end suite again with every keelson-server on PostgreSQL. The tests of the
        // PostgreSQL settings, the move from SQLite, a database restart (each with a server
        // of its own) and the data dir's disk full (SQLite's disk) run once, in the e2e project.
        test: {
          name: "e2e-postgres",
          include: ["test/e2e/**/*.test.ts"],
          exclude: [
            "test/e2e/server-postgres.test.ts",
            "test/e2e/migrate-to-postgres.test.ts",
            "test/e2e/postgres-restart.test.ts",
            "test/e2e/disk-full.test.ts",
          ],
          globalSetup: ["test/support/postgres-global-setup.ts", "test/support/server-bundle-setup.ts"],
          setupFiles: ["test/support/e2e-postgres-setup.ts"],
          provide: { storeDialect: "postgres" },
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
