-- cluster_changes (schema.ts clusterChanges): a row per committed change to what the cluster
-- records show, naming its project and cluster (none: every cluster of the project). Node
-- updates count only when a column the records show changed: a heartbeat, a phase report or a
-- command answer leaves the cached cluster reads alone.
CREATE TRIGGER `cluster_changes_clusters_insert` AFTER INSERT ON `clusters` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (new.`project_id`, new.`id`); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_clusters_update` AFTER UPDATE ON `clusters` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (new.`project_id`, new.`id`); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_clusters_delete` AFTER DELETE ON `clusters` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (old.`project_id`, old.`id`); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_cloud_providers_update` AFTER UPDATE OF `name`, `type` ON `cloud_providers` WHEN old.`name` IS NOT new.`name` OR old.`type` IS NOT new.`type` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (new.`project_id`, NULL); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_node_pools_update` AFTER UPDATE OF `name` ON `node_pools` WHEN old.`name` IS NOT new.`name` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (new.`project_id`, NULL); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_nodes_insert` AFTER INSERT ON `nodes` WHEN new.`cluster_id` IS NOT NULL BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (new.`project_id`, new.`cluster_id`); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_nodes_delete` AFTER DELETE ON `nodes` WHEN old.`cluster_id` IS NOT NULL BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) VALUES (old.`project_id`, old.`cluster_id`); END;
--> statement-breakpoint
CREATE TRIGGER `cluster_changes_nodes_update` AFTER UPDATE OF `cluster_id`, `is_master`, `status`, `agent_connected`, `api_responding` ON `nodes` WHEN old.`cluster_id` IS NOT new.`cluster_id` OR old.`is_master` IS NOT new.`is_master` OR old.`status` IS NOT new.`status` OR old.`agent_connected` IS NOT new.`agent_connected` OR old.`api_responding` IS NOT new.`api_responding` BEGIN INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) SELECT old.`project_id`, old.`cluster_id` WHERE old.`cluster_id` IS NOT NULL; INSERT INTO `cluster_changes` (`project_id`, `cluster_id`) SELECT new.`project_id`, new.`cluster_id` WHERE new.`cluster_id` IS NOT NULL AND new.`cluster_id` IS NOT old.`cluster_id`; END;
