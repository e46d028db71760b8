CREATE TABLE "cluster_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "cluster_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"project_id" text NOT NULL,
	"cluster_id" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL
);
--> statement-breakpoint
CREATE INDEX "cluster_changes_project" ON "cluster_changes" USING btree ("project_id","cluster_id","id");--> statement-breakpoint
CREATE INDEX "cluster_changes_created" ON "cluster_changes" USING btree ("created_at");