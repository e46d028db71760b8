ALTER TABLE "join_tokens" ADD COLUMN "cluster_id" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "cloud_instance_id" text;--> statement-breakpoint
ALTER TABLE "join_tokens" ADD CONSTRAINT "join_tokens_cluster_id_clusters_id_fk" FOREIGN KEY ("cluster_id") REFERENCES "public"."clusters"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "nodes_cloud_instance" ON "nodes" USING btree ("cloud_instance_id");