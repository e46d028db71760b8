ALTER TABLE `nodes` ADD `backup_status` text;--> statement-breakpoint
ALTER TABLE `nodes` ADD `backup_error` text;--> statement-breakpoint
ALTER TABLE `nodes` ADD `backup_cluster_id` text;