CREATE TABLE "addons" (
	"id" text PRIMARY KEY NOT NULL,
	"cluster_id" text NOT NULL,
	"name" text NOT NULL,
	"version" text NOT NULL,
	"state" text DEFAULT 'installed' NOT NULL,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL
);
--> statement-breakpoint
CREATE TABLE "cloud_providers" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"key_enc" text,
	"secret_enc" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL
);
--> statement-breakpoint
CREATE TABLE "cluster_access_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"cluster_id" text NOT NULL,
	"subject" text NOT NULL,
	"token_hash" text NOT NULL,
	"expires_at" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "cluster_access_tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "clusters" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"node_pool_id" text NOT NULL,
	"cloud_provider_id" text NOT NULL,
	"kube_role_version" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"task_status" text DEFAULT 'creating' NOT NULL,
	"task_error" text DEFAULT '' NOT NULL,
	"last_op" text DEFAULT '' NOT NULL,
	"last_ok" text,
	"upgrading_to" text,
	"master_vip_vrouter_id" text DEFAULT '' NOT NULL,
	"backup_task_status" text DEFAULT 'success' NOT NULL,
	"backup_task_error_detail" text DEFAULT '' NOT NULL,
	"spec" text NOT NULL,
	"ca_cert_pem" text NOT NULL,
	"ca_key_enc" text NOT NULL,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	"updated_at" text DEFAULT '' NOT NULL
);
--> statement-breakpoint
CREATE TABLE "external_clusters" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"external_id" text NOT NULL,
	"provider" text NOT NULL,
	"cloud_provider_id" text,
	"provider_details" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL
);
--> statement-breakpoint
CREATE TABLE "join_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"token_hash" text NOT NULL,
	"expires_at" text NOT NULL,
	"used_at" text,
	"used_by_node_id" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "join_tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "node_pools" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"cloud_provider_id" text NOT NULL,
	"name" text NOT NULL,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "node_pools_cloud_provider_id_unique" UNIQUE("cloud_provider_id")
);
--> statement-breakpoint
CREATE TABLE "nodes" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"node_pool_id" text NOT NULL,
	"cluster_id" text,
	"name" text NOT NULL,
	"primary_ip" text DEFAULT '' NOT NULL,
	"status" text DEFAULT 'ok' NOT NULL,
	"is_master" integer DEFAULT 0 NOT NULL,
	"api_responding" integer DEFAULT 0 NOT NULL,
	"credential_hash" text,
	"facts" text,
	"agent_version" text DEFAULT '' NOT NULL,
	"agent_status" text DEFAULT 'running' NOT NULL,
	"agent_error" text,
	"agent_connected" integer DEFAULT 0 NOT NULL,
	"last_seen" text,
	"actual_kube_role_version" text DEFAULT '' NOT NULL,
	"phases" text,
	"backup_status" text,
	"backup_error" text,
	"backup_cluster_id" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "nodes_credential_hash_unique" UNIQUE("credential_hash")
);
--> statement-breakpoint
CREATE TABLE "operations" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"kind" text NOT NULL,
	"target_type" text NOT NULL,
	"target_id" text NOT NULL,
	"params" text NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"cursor" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"error" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	"started_at" text,
	"finished_at" text
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "projects_name_unique" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"user_id" text,
	"kind" text NOT NULL,
	"name" text,
	"token_hash" text NOT NULL,
	"expires_at" text,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL,
	CONSTRAINT "tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"password_hash" text NOT NULL,
	"created_at" text DEFAULT to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') NOT NULL
);
--> statement-breakpoint
ALTER TABLE "addons" ADD CONSTRAINT "addons_cluster_id_clusters_id_fk" FOREIGN KEY ("cluster_id") REFERENCES "public"."clusters"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cloud_providers" ADD CONSTRAINT "cloud_providers_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cluster_access_tokens" ADD CONSTRAINT "cluster_access_tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cluster_access_tokens" ADD CONSTRAINT "cluster_access_tokens_cluster_id_clusters_id_fk" FOREIGN KEY ("cluster_id") REFERENCES "public"."clusters"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "clusters" ADD CONSTRAINT "clusters_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "clusters" ADD CONSTRAINT "clusters_node_pool_id_node_pools_id_fk" FOREIGN KEY ("node_pool_id") REFERENCES "public"."node_pools"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "clusters" ADD CONSTRAINT "clusters_cloud_provider_id_cloud_providers_id_fk" FOREIGN KEY ("cloud_provider_id") REFERENCES "public"."cloud_providers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "external_clusters" ADD CONSTRAINT "external_clusters_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "external_clusters" ADD CONSTRAINT "external_clusters_cloud_provider_id_cloud_providers_id_fk" FOREIGN KEY ("cloud_provider_id") REFERENCES "public"."cloud_providers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "join_tokens" ADD CONSTRAINT "join_tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "node_pools" ADD CONSTRAINT "node_pools_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "node_pools" ADD CONSTRAINT "node_pools_cloud_provider_id_cloud_providers_id_fk" FOREIGN KEY ("cloud_provider_id") REFERENCES "public"."cloud_providers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "nodes" ADD CONSTRAINT "nodes_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "nodes" ADD CONSTRAINT "nodes_node_pool_id_node_pools_id_fk" FOREIGN KEY ("node_pool_id") REFERENCES "public"."node_pools"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "nodes" ADD CONSTRAINT "nodes_cluster_id_clusters_id_fk" FOREIGN KEY ("cluster_id") REFERENCES "public"."clusters"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tokens" ADD CONSTRAINT "tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tokens" ADD CONSTRAINT "tokens_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "addons_cluster_name" ON "addons" USING btree ("cluster_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "cloud_providers_project_name" ON "cloud_providers" USING btree ("project_id","name");--> statement-breakpoint
CREATE INDEX "cluster_access_tokens_cluster" ON "cluster_access_tokens" USING btree ("cluster_id");--> statement-breakpoint
CREATE UNIQUE INDEX "clusters_project_name" ON "clusters" USING btree ("project_id","name");--> statement-breakpoint
CREATE UNIQUE INDEX "external_clusters_project_ext" ON "external_clusters" USING btree ("project_id","external_id");--> statement-breakpoint
CREATE INDEX "node_pools_project" ON "node_pools" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "nodes_project" ON "nodes" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "nodes_cluster" ON "nodes" USING btree ("cluster_id");--> statement-breakpoint
CREATE INDEX "operations_state" ON "operations" USING btree ("state");--> statement-breakpoint
CREATE INDEX "operations_target" ON "operations" USING btree ("target_id");--> statement-breakpoint
CREATE INDEX "operations_project" ON "operations" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "tokens_project" ON "tokens" USING btree ("project_id");--> statement-breakpoint
CREATE UNIQUE INDEX "users_project_name" ON "users" USING btree ("project_id","name");