ALTER TABLE `join_tokens` ADD `cluster_id` text REFERENCES clusters(id);--> statement-breakpoint
ALTER TABLE `nodes` ADD `cloud_instance_id` text;--> statement-breakpoint
CREATE UNIQUE INDEX `nodes_cloud_instance` ON `nodes` (`cloud_instance_id`);