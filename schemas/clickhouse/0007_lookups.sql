-- Where event_time came from: the runtime's isoTime, or ingest's receipt
-- when the runtime sent none (or one that did not parse). Rows written
-- before this column existed are told apart by comparing the two times.
-- Bloom-filter skip indexes, where the server has them, let a session's
-- transcript and a user's history read the granules holding that session
-- or user rather than the whole days they span; parts written before the
-- index was added are read in full until merged (or until MATERIALIZE
-- INDEX rewrites them).
{{- if not .Cluster}}
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} event_time_source {{.TimeSource}} AFTER kb_faqs
{{- if .SkipIndexes}};
ALTER TABLE {{table "events"}} ADD INDEX IF NOT EXISTS session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 2;
ALTER TABLE {{table "events"}} ADD INDEX IF NOT EXISTS user_idx user_id TYPE bloom_filter(0.01) GRANULARITY 2
{{- end}}
{{- else if .SkipIndexes}}
-- A cluster's tables have the column and the indexes from migration 1
-- (see migration 4). A cluster made before that, on servers that take
-- ALTER ... ON CLUSTER with IF NOT EXISTS, gets them here; on 18.x
-- servers, which can abort on such an ALTER, they are added by hand.
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD COLUMN IF NOT EXISTS event_time_source {{.TimeSource}} AFTER kb_faqs;
ALTER TABLE {{.DB}}.events{{.OnCluster}} ADD COLUMN IF NOT EXISTS event_time_source {{.TimeSource}} AFTER kb_faqs;
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD INDEX IF NOT EXISTS session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 2;
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD INDEX IF NOT EXISTS user_idx user_id TYPE bloom_filter(0.01) GRANULARITY 2
{{- end}}
