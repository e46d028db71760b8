CREATE TABLE `addons` (
	`id` text PRIMARY KEY NOT NULL,
	`cluster_id` text NOT NULL,
	`name` text NOT NULL,
	`version` text NOT NULL,
	`state` text DEFAULT 'installed' NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `addons_cluster_name` ON `addons` (`cluster_id`,`name`);--> statement-breakpoint
CREATE TABLE `cloud_providers` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`type` text NOT NULL,
	`key_enc` text,
	`secret_enc` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cloud_providers_project_name` ON `cloud_providers` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `cluster_access_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`cluster_id` text NOT NULL,
	`subject` text NOT NULL,
	`token_hash` text NOT NULL,
	`expires_at` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `cluster_access_tokens_token_hash_unique` ON `cluster_access_tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `cluster_access_tokens_cluster` ON `cluster_access_tokens` (`cluster_id`);--> statement-breakpoint
CREATE TABLE `clusters` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`node_pool_id` text NOT NULL,
	`cloud_provider_id` text NOT NULL,
	`kube_role_version` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`task_status` text DEFAULT 'creating' NOT NULL,
	`task_error` text DEFAULT '' NOT NULL,
	`last_op` text DEFAULT '' NOT NULL,
	`last_ok` text,
	`upgrading_to` text,
	`master_vip_vrouter_id` text DEFAULT '' NOT NULL,
	`backup_task_status` text DEFAULT 'success' NOT NULL,
	`backup_task_error_detail` text DEFAULT '' NOT NULL,
	`spec` text NOT NULL,
	`ca_cert_pem` text NOT NULL,
	`ca_key_enc` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`node_pool_id`) REFERENCES `node_pools`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`cloud_provider_id`) REFERENCES `cloud_providers`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `clusters_project_name` ON `clusters` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `external_clusters` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`external_id` text NOT NULL,
	`provider` text NOT NULL,
	`cloud_provider_id` text,
	`provider_details` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cloud_provider_id`) REFERENCES `cloud_providers`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `external_clusters_project_ext` ON `external_clusters` (`project_id`,`external_id`);--> statement-breakpoint
CREATE TABLE `join_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`token_hash` text NOT NULL,
	`expires_at` text NOT NULL,
	`used_at` text,
	`used_by_node_id` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `join_tokens_token_hash_unique` ON `join_tokens` (`token_hash`);--> statement-breakpoint
CREATE TABLE `node_pools` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`cloud_provider_id` text NOT NULL,
	`name` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`cloud_provider_id`) REFERENCES `cloud_providers`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `node_pools_cloud_provider_id_unique` ON `node_pools` (`cloud_provider_id`);--> statement-breakpoint
CREATE INDEX `node_pools_project` ON `node_pools` (`project_id`);--> statement-breakpoint
CREATE TABLE `nodes` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`node_pool_id` text NOT NULL,
	`cluster_id` text,
	`name` text NOT NULL,
	`primary_ip` text DEFAULT '' NOT NULL,
	`status` text DEFAULT 'ok' NOT NULL,
	`is_master` integer DEFAULT 0 NOT NULL,
	`api_responding` integer DEFAULT 0 NOT NULL,
	`credential_hash` text,
	`facts` text,
	`agent_version` text DEFAULT '' NOT NULL,
	`agent_status` text DEFAULT 'running' NOT NULL,
	`agent_error` text,
	`agent_connected` integer DEFAULT 0 NOT NULL,
	`last_seen` text,
	`actual_kube_role_version` text DEFAULT '' NOT NULL,
	`phases` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`node_pool_id`) REFERENCES `node_pools`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE UNIQUE INDEX `nodes_credential_hash_unique` ON `nodes` (`credential_hash`);--> statement-breakpoint
CREATE INDEX `nodes_project` ON `nodes` (`project_id`);--> statement-breakpoint
CREATE INDEX `nodes_cluster` ON `nodes` (`cluster_id`);--> statement-breakpoint
CREATE TABLE `operations` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`kind` text NOT NULL,
	`target_type` text NOT NULL,
	`target_id` text NOT NULL,
	`params` text NOT NULL,
	`state` text DEFAULT 'pending' NOT NULL,
	`cursor` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`started_at` text,
	`finished_at` text,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `operations_state` ON `operations` (`state`);--> statement-breakpoint
CREATE INDEX `operations_target` ON `operations` (`target_id`);--> statement-breakpoint
CREATE INDEX `operations_project` ON `operations` (`project_id`);--> statement-breakpoint
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `projects_name_unique` ON `projects` (`name`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`user_id` text,
	`kind` text NOT NULL,
	`name` text,
	`token_hash` text NOT NULL,
	`expires_at` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_token_hash_unique` ON `tokens` (`token_hash`);--> statement-breakpoint
CREATE INDEX `tokens_project` ON `tokens` (`project_id`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`password_hash` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_project_name` ON `users` (`project_id`,`name`);