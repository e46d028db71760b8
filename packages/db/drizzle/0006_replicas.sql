CREATE TABLE `replicas` (
	`id` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`version` text NOT NULL,
	`host` text NOT NULL,
	`pid` integer NOT NULL,
	`started_at` text NOT NULL,
	`heartbeat_at` text NOT NULL,
	`agents_held` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE `operations` ADD `owner` text;--> statement-breakpoint
ALTER TABLE `operations` ADD `fence` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `operations` ADD `lease_until` text;--> statement-breakpoint
CREATE INDEX `operations_owner` ON `operations` (`owner`);