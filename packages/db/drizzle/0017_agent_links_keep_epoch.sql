PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_agent_links` (
	`host_id` text PRIMARY KEY NOT NULL,
	`replica` text,
	`epoch` integer NOT NULL,
	`connected_at` text NOT NULL,
	FOREIGN KEY (`host_id`) REFERENCES `nodes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_agent_links`("host_id", "replica", "epoch", "connected_at") SELECT "host_id", "replica", "epoch", "connected_at" FROM `agent_links`;--> statement-breakpoint
DROP TABLE `agent_links`;--> statement-breakpoint
ALTER TABLE `__new_agent_links` RENAME TO `agent_links`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `agent_links_replica` ON `agent_links` (`replica`);