-- The large JSON columns a rollout rewrites (a node's phases at every report, an operation's
-- cursor at every save, commands and events) are compressed with lz4 where the server has it:
-- PostgreSQL 14 and later built with lz4, which Debian's and the official images are. pglz, the
-- default, cost a 1,000-node restart about a tenth of PostgreSQL's CPU (README, "Benchmarks").
-- A server without lz4 keeps pglz; values already stored keep theirs until rewritten.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    ALTER TABLE "nodes" ALTER COLUMN "phases" SET COMPRESSION lz4;
    ALTER TABLE "nodes" ALTER COLUMN "facts" SET COMPRESSION lz4;
    ALTER TABLE "operations" ALTER COLUMN "cursor" SET COMPRESSION lz4;
    ALTER TABLE "operations" ALTER COLUMN "params" SET COMPRESSION lz4;
    ALTER TABLE "agent_commands" ALTER COLUMN "payload" SET COMPRESSION lz4;
    ALTER TABLE "agent_commands" ALTER COLUMN "result" SET COMPRESSION lz4;
    ALTER TABLE "events" ALTER COLUMN "payload" SET COMPRESSION lz4;
  END IF;
END $$;
