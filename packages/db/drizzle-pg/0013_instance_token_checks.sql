CREATE TABLE "instance_token_checks" (
	"cluster_id" text PRIMARY KEY NOT NULL,
	"checked_at" text NOT NULL,
	"checked_by" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "instance_token_checks" ADD CONSTRAINT "instance_token_checks_cluster_id_clusters_id_fk" FOREIGN KEY ("cluster_id") REFERENCES "public"."clusters"("id") ON DELETE cascade ON UPDATE no action;