ALTER TABLE `clusters` ADD `updated_at` text DEFAULT '' NOT NULL;
--> statement-breakpoint
UPDATE `clusters` SET `updated_at` = `created_at`;
