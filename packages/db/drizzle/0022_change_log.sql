CREATE TABLE `change_log` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`scope` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `change_log_scope` ON `change_log` (`scope`,`id`);--> statement-breakpoint
CREATE INDEX `change_log_created` ON `change_log` (`created_at`);