ALTER TABLE "tokens" ADD COLUMN "role" text DEFAULT 'member' NOT NULL;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "role" text DEFAULT 'member' NOT NULL;--> statement-breakpoint
-- Before roles every user and project token could do everything in its project: they stay able to.
UPDATE "users" SET "role" = 'admin';--> statement-breakpoint
UPDATE "tokens" SET "role" = 'admin';--> statement-breakpoint
-- The oldest server that enforces roles (a server without them would let a reader do everything).
INSERT INTO "keelson_schema" ("id", "min_binary_version") VALUES (1, '0.1.0') ON CONFLICT("id") DO UPDATE SET "min_binary_version" = excluded."min_binary_version";
