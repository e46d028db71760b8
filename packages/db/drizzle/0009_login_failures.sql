CREATE TABLE `login_failures` (
	`key` text PRIMARY KEY NOT NULL,
	`failures` integer NOT NULL,
	`since` text NOT NULL
);
