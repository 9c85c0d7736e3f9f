-- The first copy of an event wins. events was a ReplacingMergeTree
-- without a version, which keeps the copy inserted last: anyone holding
-- an app's runtime token could send an event again under an ID already
-- stored (a client eventId, or the ID an Idempotency-Key gives) and
-- replace what was recorded. The new table's version is arrival_rank,
-- the bitwise NOT of ingest's receipt in nanoseconds: the earliest copy
-- ranks highest, so FINAL and merges keep it, whatever order the copies
-- were inserted in. A table's engine cannot change, so the rows move:
-- the new table is made, a view forwards what is written meanwhile,
-- every row is copied with the rank of its receipt, and the names swap;
-- the older table stays as events_v12 until an operator drops it. The
-- swap's statements are skipped once events has arrival_rank, so that
-- the migration can run again. The views of migrations 8 and 12 are then
-- made again over the new table: current servers keep a view bound to
-- the table it was made on, whatever its name.
{{skipOnceColumn "events" "arrival_rank"}}
{{- skip}}CREATE TABLE IF NOT EXISTS {{table "events_v13"}}{{.OnCluster}}
(
    event_id            String,
    app_id              LowCardinality(String),
    organization_id     LowCardinality(String),
    event_time          {{.Time}},
    received_at         {{.Time}},
    type                LowCardinality(String),
    name                LowCardinality(String),
    session_id          String,
    user_id             String,
    channel             LowCardinality(String),
    platform            LowCardinality(String),
    selected_handler    LowCardinality(String),
    current_handler     LowCardinality(String),
    environment         LowCardinality(String),
    request_type        LowCardinality(String),
    intent_id           LowCardinality(String),
    raw_query           String{{.Codec}},
    query_normalized    String DEFAULT lowerUTF8(replaceRegexpAll(replaceRegexpAll(raw_query, '^\\s+|\\s+$', ''), '\\s+', ' ')),
    match_confidence    Nullable(Float32),
    output_display_text String{{.Codec}},
    output_ssml         String{{.Codec}},
    display_count       UInt16,
    tag                 String,
    tags                Array(String),
    error_message       String{{.Codec}},
    error_stack         String{{.Codec}},
    message             String{{.Codec}},
    kb_used             UInt8,
    kb_documents        UInt16,
    kb_faqs             UInt16,
    event_time_source   {{.TimeSource}},
    runtime_time        Nullable({{.Time}}),
    token_id            LowCardinality(String),
    client_network      String,
    payload             String{{.Codec}},
    extra               String{{.Codec}},
    kafka_partition     UInt16,
    kafka_offset        UInt64,
    -- Writers send it (the consumer does, from the receipt's nanoseconds);
    -- the default, from received_at, covers those that do not.
    arrival_rank        UInt64 DEFAULT {{.ArrivalRank}}
{{- if .SkipIndexes}},
    INDEX session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 2,
    INDEX user_idx user_id TYPE bloom_filter(0.01) GRANULARITY 2
{{- end}}
)
ENGINE = {{engine "ReplacingMergeTree" "events_v13" "arrival_rank"}}
PARTITION BY toYYYYMM(event_time)
ORDER BY (app_id, toDate(event_time), event_id)
{{.TTL}}
{{- if .Cluster}};
-- What the consumer will write to: a Distributed table with the new
-- columns over the name the new local table will have.
{{skip}}{{distributedOver "events_next" "events_v13" "events"}}
{{- end}}
{{- if .OnCluster}};
-- In a replicated cluster the copy goes through a Distributed table, so
-- that every shard's rows reach the same shard's new table.
{{skip}}{{distributedOver "events_v13" "events_v13" "events_v13"}}
{{- end}};
{{skip}}CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.events_v13_mv{{.OnCluster}} TO {{table "events_v13"}}
AS SELECT {{.EventColumns}}, {{.ArrivalRank}} AS arrival_rank
FROM {{table "events"}};
{{- if .OnCluster}}
{{skip}}INSERT INTO {{.DB}}.events_v13 ({{.EventColumns}}, arrival_rank)
SELECT {{.EventColumns}}, {{.ArrivalRank}} FROM {{.DB}}.events;
{{- else}}
{{skip}}INSERT INTO {{table "events_v13"}} ({{.EventColumns}}, arrival_rank)
SELECT {{.EventColumns}}, {{.ArrivalRank}} FROM {{table "events"}};
{{- end}}
{{skip}}RENAME TABLE {{table "events"}} TO {{table "events_v12"}}, {{table "events_v13"}} TO {{table "events"}}
{{- if .Cluster}}, {{.DB}}.events TO {{.DB}}.events_v12, {{.DB}}.events_next TO {{.DB}}.events{{end}}{{.OnCluster}};
DROP TABLE IF EXISTS {{.DB}}.events_v13_mv{{.OnCluster}}
{{- if .Cluster}};
-- The Distributed tables of the copy and of the older table.
DROP TABLE IF EXISTS {{.DB}}.events_v13{{.OnCluster}};
DROP TABLE IF EXISTS {{.DB}}.events_v12{{.OnCluster}}
{{- end}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.app_daily_mv13{{.OnCluster}} TO {{table "app_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    uniqState(event_id) AS events,
    uniqIfState(session_id, session_id != '') AS conversations,
    uniqIfState(user_id, user_id != '') AS users,
    uniqIfState(event_id, {{turn}}) AS turns,
    uniqIfState(event_id, {{turn}} AND {{fallback}}) AS fallback_turns,
    uniqIfState(event_id, {{turn}} AND kb_used = 1) AS knowledge_base_turns,
    uniqIfState(event_id, type = 'ERROR') AS errors,
    avgIfState(ifNull(match_confidence, 0), {{turn}} AND isNotNull(match_confidence)) AS confidence
FROM {{table "events"}}
GROUP BY app_id, channel, day;
DROP TABLE IF EXISTS {{.DB}}.app_daily_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.intent_daily_mv13{{.OnCluster}} TO {{table "intent_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    CAST(intent_id AS String) AS intent_id,
    uniqState(event_id) AS turns,
    uniqIfState(event_id, {{lowConfidence}}) AS low_confidence_turns,
    avgIfState(ifNull(match_confidence, 0), isNotNull(match_confidence)) AS confidence
FROM {{table "events"}}
WHERE {{turn}} AND intent_id != ''
GROUP BY app_id, channel, day, intent_id;
DROP TABLE IF EXISTS {{.DB}}.intent_daily_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.sessions_mv13{{.OnCluster}} TO {{table "sessions"}}
AS SELECT
    app_id,
    toDate(event_time) AS day,
    session_id,
    anyIfState(user_id, user_id != '') AS user_id,
    anyState(CAST(channel AS String)) AS channel,
    minState(event_time) AS first_event,
    maxState(event_time) AS last_event,
    uniqState(event_id) AS events,
    uniqIfState(event_id, {{turn}}) AS turns,
    groupUniqArrayIfState(CAST(selected_handler AS String), selected_handler != '') AS handlers,
    argMaxIfState(CAST(selected_handler AS String), {{.TimeKey}} * 4 + {{eventRank}}, selected_handler != '') AS last_handler,
    argMaxIfState(multiIf({{failure}}, 'error', {{fallback}}, 'fallback', 'answered'),
        {{.TimeKey}} * 4 + {{eventRank}}, {{failure}} OR {{turn}}) AS outcome
FROM {{table "events"}}
WHERE session_id != ''
GROUP BY app_id, day, session_id;
DROP TABLE IF EXISTS {{.DB}}.sessions_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_sources_mv13{{.OnCluster}} TO {{table "query_sources"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    countState() AS asked,
    uniqState(user_id) AS users,
    uniqState(session_id) AS sessions,
    uniqState(CAST(token_id AS String), client_network) AS sources
FROM {{table "events"}}
WHERE query_normalized != '' AND user_id != '' AND session_id != '' AND client_network != ''
  AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, channel, day, query;
DROP TABLE IF EXISTS {{.DB}}.query_sources_mv12{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_daily_mv13{{.OnCluster}} TO {{table "query_counts_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    toUInt64(1) AS asked
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}});
DROP TABLE IF EXISTS {{.DB}}.query_counts_daily_mv12{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.user_queries_mv13{{.OnCluster}} TO {{table "user_queries"}}
AS SELECT
    app_id,
    user_id,
    toDate(event_time) AS day,
    query_normalized AS query
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, user_id, day, query;
DROP TABLE IF EXISTS {{.DB}}.user_queries_mv12{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.unanswered_daily_mv13{{.OnCluster}} TO {{table "unanswered_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    uniqState(event_id) AS asked,
    uniqIfState(user_id, user_id != '') AS users
FROM {{table "events"}}
WHERE {{turn}} AND query_normalized != '' AND ({{fallback}} OR {{lowConfidence}})
  AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, channel, day, query;
DROP TABLE IF EXISTS {{.DB}}.unanswered_daily_mv12{{.OnCluster}}
