CREATE TABLE `host_presence` (
	`host_id` text PRIMARY KEY NOT NULL,
	`last_seen` text NOT NULL
);
