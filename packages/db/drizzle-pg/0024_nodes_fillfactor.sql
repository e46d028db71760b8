-- A node's row is rewritten at every report (status, phases, last seen: twice per node of a
-- rollout) and is about 1.5 KB, so a page held five and had no room left for a new version:
-- every such UPDATE went to another page and added an entry to each of the table's six
-- indexes. Pages filled to 60% keep room for the new version beside the old one (a HOT update,
-- no index entry), which roughly halved what PostgreSQL spends on these UPDATEs (README,
-- "Benchmarks"). Only pages written from now on are kept so; no column or rule changes.
ALTER TABLE "nodes" SET (fillfactor = 60);
