CREATE TABLE `agent_commands` (
	`id` text PRIMARY KEY NOT NULL,
	`host_id` text NOT NULL,
	`name` text NOT NULL,
	`payload` text NOT NULL,
	`timeout_ms` integer NOT NULL,
	`operation_id` text,
	`fence` integer,
	`state` text DEFAULT 'pending' NOT NULL,
	`result` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`expires_at` text NOT NULL,
	FOREIGN KEY (`host_id`) REFERENCES `nodes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `agent_commands_host_state` ON `agent_commands` (`host_id`,`state`);--> statement-breakpoint
CREATE INDEX `agent_commands_expires` ON `agent_commands` (`expires_at`);--> statement-breakpoint
CREATE TABLE `agent_links` (
	`host_id` text PRIMARY KEY NOT NULL,
	`replica` text NOT NULL,
	`epoch` integer NOT NULL,
	`connected_at` text NOT NULL,
	FOREIGN KEY (`host_id`) REFERENCES `nodes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `agent_links_replica` ON `agent_links` (`replica`);