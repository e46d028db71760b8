ALTER TABLE `cluster_changes` ADD `folded` integer;--> statement-breakpoint
ALTER TABLE `cluster_changes` ADD `id_sum` integer;