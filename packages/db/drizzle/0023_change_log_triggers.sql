-- The rows of change_log's scope `clusters` (schema.ts changeLog): one per committed change to
-- what the cluster records read. Node updates count only when a column the records show changed:
-- a heartbeat, a phase report or a command answer leaves the cluster reads' cache alone.
CREATE TRIGGER `change_log_clusters_insert` AFTER INSERT ON `clusters` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_clusters_update` AFTER UPDATE ON `clusters` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_clusters_delete` AFTER DELETE ON `clusters` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_cloud_providers_update` AFTER UPDATE OF `name`, `type` ON `cloud_providers` WHEN old.`name` IS NOT new.`name` OR old.`type` IS NOT new.`type` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_node_pools_update` AFTER UPDATE OF `name` ON `node_pools` WHEN old.`name` IS NOT new.`name` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_nodes_insert` AFTER INSERT ON `nodes` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_nodes_delete` AFTER DELETE ON `nodes` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
--> statement-breakpoint
CREATE TRIGGER `change_log_nodes_update` AFTER UPDATE OF `cluster_id`, `is_master`, `status`, `agent_connected`, `api_responding` ON `nodes` WHEN old.`cluster_id` IS NOT new.`cluster_id` OR old.`is_master` IS NOT new.`is_master` OR old.`status` IS NOT new.`status` OR old.`agent_connected` IS NOT new.`agent_connected` OR old.`api_responding` IS NOT new.`api_responding` BEGIN INSERT INTO `change_log` (`scope`) VALUES ('clusters'); END;
