CREATE TABLE "keelson_schema" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"min_binary_version" text NOT NULL
);
--> statement-breakpoint
INSERT INTO "keelson_schema" ("id", "min_binary_version") VALUES (1, '0.1.0') ON CONFLICT("id") DO UPDATE SET "min_binary_version" = excluded."min_binary_version";
