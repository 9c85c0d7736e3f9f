-- What the server knows of each event beside what the runtime claims:
-- runtime_time is the runtime's own isoTime (NULL when it sent none that
-- parses), while event_time, which the rollups and suggestions read, is
-- that time only when it lies near ingest's receipt, and the receipt
-- otherwise (the consumer's EVENT_TIME_MAX_FUTURE and
-- EVENT_TIME_MAX_PAST); token_id is the access token that sent the batch
-- and client_network the sender's network (an IPv4 /24 or IPv6 /48, as
-- ingest saw the connection or a trusted proxy's X-Forwarded-For), which
-- HISTORICAL suggestions count distinct sources by. Rows written before
-- have them empty. One column per statement, as in migration 4; a
-- cluster's tables have them from migration 1, and an older cluster gets
-- them here on servers that take ALTER ... ON CLUSTER with IF NOT EXISTS
-- (see migration 7; on 18.x servers they are added by hand).
{{- if not .Cluster}}
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} runtime_time Nullable({{.Time}}) AFTER event_time_source;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} token_id LowCardinality(String) AFTER runtime_time;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} client_network String AFTER token_id
{{- else if .SkipIndexes}}
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD COLUMN IF NOT EXISTS runtime_time Nullable({{.Time}}) AFTER event_time_source;
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD COLUMN IF NOT EXISTS token_id LowCardinality(String) AFTER runtime_time;
ALTER TABLE {{table "events"}}{{.OnCluster}} ADD COLUMN IF NOT EXISTS client_network String AFTER token_id;
ALTER TABLE {{.DB}}.events{{.OnCluster}} ADD COLUMN IF NOT EXISTS runtime_time Nullable({{.Time}}) AFTER event_time_source;
ALTER TABLE {{.DB}}.events{{.OnCluster}} ADD COLUMN IF NOT EXISTS token_id LowCardinality(String) AFTER runtime_time;
ALTER TABLE {{.DB}}.events{{.OnCluster}} ADD COLUMN IF NOT EXISTS client_network String AFTER token_id
{{- end}}
