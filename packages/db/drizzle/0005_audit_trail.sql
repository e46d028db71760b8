CREATE TABLE `audit_events` (
	`id` text PRIMARY KEY NOT NULL,
	`at` text NOT NULL,
	`actor` text NOT NULL,
	`user_id` text,
	`token_id` text,
	`project_id` text,
	`source` text NOT NULL,
	`method` text NOT NULL,
	`route` text NOT NULL,
	`target` text,
	`status` integer,
	`operation_id` text,
	`credential` text
);
--> statement-breakpoint
CREATE INDEX `audit_events_at` ON `audit_events` (`at`);--> statement-breakpoint
CREATE INDEX `audit_events_project_at` ON `audit_events` (`project_id`,`at`);