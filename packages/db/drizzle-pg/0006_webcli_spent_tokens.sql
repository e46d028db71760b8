CREATE TABLE "webcli_spent_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"expires_at" text NOT NULL
);
--> statement-breakpoint
CREATE INDEX "webcli_spent_tokens_expires_at" ON "webcli_spent_tokens" USING btree ("expires_at");