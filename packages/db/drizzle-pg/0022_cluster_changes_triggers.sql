-- cluster_changes (schema.ts clusterChanges): a row per committed change to what the cluster
-- records show, naming its project and cluster (none: every cluster of the project). Node
-- updates count only when a column the records show changed: a heartbeat, a phase report or a
-- command answer leaves the cached cluster reads alone. Row triggers that insert (never update
-- a shared row), so concurrent writers do not queue on them.
CREATE FUNCTION keelson_cluster_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (OLD.project_id, OLD.id);
  ELSE
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (NEW.project_id, NEW.id);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE FUNCTION keelson_cluster_project_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO cluster_changes (project_id, cluster_id) VALUES (NEW.project_id, NULL);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE FUNCTION keelson_cluster_node_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.cluster_id IS NOT NULL THEN
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (OLD.project_id, OLD.cluster_id);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.cluster_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.cluster_id IS DISTINCT FROM OLD.cluster_id) THEN
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (NEW.project_id, NEW.cluster_id);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER cluster_changes_clusters AFTER INSERT OR UPDATE OR DELETE ON clusters FOR EACH ROW EXECUTE FUNCTION keelson_cluster_changed();
--> statement-breakpoint
CREATE TRIGGER cluster_changes_cloud_providers_update AFTER UPDATE OF name, type ON cloud_providers FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.type IS DISTINCT FROM NEW.type) EXECUTE FUNCTION keelson_cluster_project_changed();
--> statement-breakpoint
CREATE TRIGGER cluster_changes_node_pools_update AFTER UPDATE OF name ON node_pools FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION keelson_cluster_project_changed();
--> statement-breakpoint
CREATE TRIGGER cluster_changes_nodes AFTER INSERT OR DELETE ON nodes FOR EACH ROW EXECUTE FUNCTION keelson_cluster_node_changed();
--> statement-breakpoint
CREATE TRIGGER cluster_changes_nodes_update AFTER UPDATE OF cluster_id, is_master, status, agent_connected, api_responding ON nodes FOR EACH ROW WHEN (OLD.cluster_id IS DISTINCT FROM NEW.cluster_id OR OLD.is_master IS DISTINCT FROM NEW.is_master OR OLD.status IS DISTINCT FROM NEW.status OR OLD.agent_connected IS DISTINCT FROM NEW.agent_connected OR OLD.api_responding IS DISTINCT FROM NEW.api_responding) EXECUTE FUNCTION keelson_cluster_node_changed();
