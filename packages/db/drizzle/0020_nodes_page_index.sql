DROP INDEX `nodes_project`;--> statement-breakpoint
CREATE INDEX `nodes_project_created` ON `nodes` (`project_id`,`created_at`,`name`,`id`);--> statement-breakpoint
CREATE INDEX `nodes_created` ON `nodes` (`created_at`,`name`,`id`);