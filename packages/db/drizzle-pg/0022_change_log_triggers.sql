-- The rows of change_log's scope `clusters` (schema.ts changeLog): one per committed change to
-- what the cluster records read. Node updates count only when a column the records show changed:
-- a heartbeat, a phase report or a command answer leaves the cluster reads' cache alone. Row
-- triggers that insert (never update a shared row): concurrent writers do not queue on them.
CREATE FUNCTION keelson_change_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO change_log (scope) VALUES (TG_ARGV[0]);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER change_log_clusters AFTER INSERT OR UPDATE OR DELETE ON clusters FOR EACH ROW EXECUTE FUNCTION keelson_change_log('clusters');
--> statement-breakpoint
CREATE TRIGGER change_log_cloud_providers_update AFTER UPDATE OF name, type ON cloud_providers FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.type IS DISTINCT FROM NEW.type) EXECUTE FUNCTION keelson_change_log('clusters');
--> statement-breakpoint
CREATE TRIGGER change_log_node_pools_update AFTER UPDATE OF name ON node_pools FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION keelson_change_log('clusters');
--> statement-breakpoint
CREATE TRIGGER change_log_nodes AFTER INSERT OR DELETE ON nodes FOR EACH ROW EXECUTE FUNCTION keelson_change_log('clusters');
--> statement-breakpoint
CREATE TRIGGER change_log_nodes_update AFTER UPDATE OF cluster_id, is_master, status, agent_connected, api_responding ON nodes FOR EACH ROW WHEN (OLD.cluster_id IS DISTINCT FROM NEW.cluster_id OR OLD.is_master IS DISTINCT FROM NEW.is_master OR OLD.status IS DISTINCT FROM NEW.status OR OLD.agent_connected IS DISTINCT FROM NEW.agent_connected OR OLD.api_responding IS DISTINCT FROM NEW.api_responding) EXECUTE FUNCTION keelson_change_log('clusters');
