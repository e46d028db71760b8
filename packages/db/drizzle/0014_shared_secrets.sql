CREATE TABLE `shared_secrets` (
	`name` text PRIMARY KEY NOT NULL,
	`sealed` text NOT NULL,
	`created_at` text NOT NULL
);
