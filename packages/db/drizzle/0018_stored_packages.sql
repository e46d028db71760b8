CREATE TABLE `stored_package_chunks` (
	`package_id` text NOT NULL,
	`seq` integer NOT NULL,
	`data` blob NOT NULL,
	FOREIGN KEY (`package_id`) REFERENCES `stored_packages`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `stored_package_chunks_package_seq` ON `stored_package_chunks` (`package_id`,`seq`);--> statement-breakpoint
CREATE TABLE `stored_packages` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`version` text NOT NULL,
	`sha256` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`stored_at` text NOT NULL,
	`meta` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `stored_packages_kind_version` ON `stored_packages` (`kind`,`version`);