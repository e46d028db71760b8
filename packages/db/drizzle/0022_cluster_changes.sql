CREATE TABLE `cluster_changes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` text NOT NULL,
	`cluster_id` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `cluster_changes_project` ON `cluster_changes` (`project_id`,`cluster_id`,`id`);--> statement-breakpoint
CREATE INDEX `cluster_changes_created` ON `cluster_changes` (`created_at`);