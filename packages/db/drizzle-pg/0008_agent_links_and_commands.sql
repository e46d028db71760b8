CREATE TABLE "agent_commands" (
	"id" text PRIMARY KEY NOT NULL,
	"host_id" text NOT NULL,
	"name" text NOT NULL,
	"payload" text NOT NULL,
	"timeout_ms" integer NOT NULL,
	"operation_id" text,
	"fence" integer,
	"state" text DEFAULT 'pending' NOT NULL,
	"result" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	"expires_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agent_links" (
	"host_id" text PRIMARY KEY NOT NULL,
	"replica" text NOT NULL,
	"epoch" integer NOT NULL,
	"connected_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "agent_commands" ADD CONSTRAINT "agent_commands_host_id_nodes_id_fk" FOREIGN KEY ("host_id") REFERENCES "public"."nodes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_links" ADD CONSTRAINT "agent_links_host_id_nodes_id_fk" FOREIGN KEY ("host_id") REFERENCES "public"."nodes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "agent_commands_host_state" ON "agent_commands" USING btree ("host_id","state");--> statement-breakpoint
CREATE INDEX "agent_commands_expires" ON "agent_commands" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "agent_links_replica" ON "agent_links" USING btree ("replica");