DROP INDEX "nodes_project";--> statement-breakpoint
CREATE INDEX "nodes_project_created" ON "nodes" USING btree ("project_id","created_at","name","id");--> statement-breakpoint
CREATE INDEX "nodes_created" ON "nodes" USING btree ("created_at","name","id");