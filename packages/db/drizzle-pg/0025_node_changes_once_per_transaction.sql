-- A node's change to what the cluster records show is logged once per transaction and cluster,
-- not once per node: a stamp (store/cluster-changes.ts) only needs a new row in every commit
-- that changes its scope. A batch of node reports (one UPDATE of up to a hundred nodes of one
-- cluster, each status change firing this trigger) inserted a row per node: a quarter of the
-- 4,000 rows a 1,000-node rollout logs was all it needed, and the inserts were an eighth of
-- PostgreSQL's time in the rollout (README, "Benchmarks"). The clusters this transaction has
-- logged are kept in a transaction-local setting (rolled back with a savepoint, like the
-- insert); past 8,000 characters (about 200 clusters in one transaction) every change is
-- logged again, so the check stays short.
CREATE OR REPLACE FUNCTION keelson_cluster_node_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  logged text := coalesce(current_setting('keelson.cluster_changes_logged', true), '');
  moved boolean := false;
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.cluster_id IS NOT NULL AND position(OLD.cluster_id || ' ' IN logged) = 0 THEN
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (OLD.project_id, OLD.cluster_id);
    logged := logged || OLD.cluster_id || ' ';
    moved := true;
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.cluster_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.cluster_id IS DISTINCT FROM OLD.cluster_id)
     AND position(NEW.cluster_id || ' ' IN logged) = 0 THEN
    INSERT INTO cluster_changes (project_id, cluster_id) VALUES (NEW.project_id, NEW.cluster_id);
    logged := logged || NEW.cluster_id || ' ';
    moved := true;
  END IF;
  IF moved THEN
    PERFORM set_config('keelson.cluster_changes_logged', CASE WHEN length(logged) > 8000 THEN '' ELSE logged END, true);
  END IF;
  RETURN NULL;
END
$$;
