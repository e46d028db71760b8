CREATE TABLE `instance_token_checks` (
	`cluster_id` text PRIMARY KEY NOT NULL,
	`checked_at` text NOT NULL,
	`checked_by` text NOT NULL,
	FOREIGN KEY (`cluster_id`) REFERENCES `clusters`(`id`) ON UPDATE no action ON DELETE cascade
);
