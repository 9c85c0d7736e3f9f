-- Asked queries kept no longer than the events they come from, and none
-- that looks like it holds personal data.
--
-- query_counts_daily: how often each normalised query was asked, per app,
-- channel and day, with the events' retention. It replaces query_counts,
-- which had no day to expire by and no filter; query_counts stays as a
-- view of it, so that analysts' queries of it still run.
CREATE TABLE IF NOT EXISTS {{table "query_counts_daily"}}{{.OnCluster}}
(
    app_id  LowCardinality(String),
    channel LowCardinality(String),
    day     Date,
    query   String,
    asked   UInt64
)
ENGINE = {{engine "SummingMergeTree" "query_counts_daily" "(asked)"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day, query)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "query_counts_daily" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_daily_mv{{.OnCluster}} TO {{table "query_counts_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    toUInt64(1) AS asked
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}});
DROP TABLE IF EXISTS {{.DB}}.query_counts_mv{{.OnCluster}};
DROP TABLE IF EXISTS {{.DB}}.query_counts{{.OnCluster}}
{{- if .Cluster}};
DROP TABLE IF EXISTS {{table "query_counts"}}{{.OnCluster}}
{{- end}};
CREATE VIEW IF NOT EXISTS {{.DB}}.query_counts{{.OnCluster}}
AS SELECT app_id, channel, day, query, asked FROM {{.DB}}.query_counts_daily;
-- user_queries: which normalised queries each user ID (empty for events
-- without one) asked on which day, kept as long as the tables of queries
-- it indexes (the events' retention), so that forgetting a user finds
-- their queries in query_counts_daily, query_sources and
-- unanswered_daily even once their events have expired or were dropped.
-- Queries those tables never keep are not kept here either.
CREATE TABLE IF NOT EXISTS {{table "user_queries"}}{{.OnCluster}}
(
    app_id  LowCardinality(String),
    user_id String,
    day     Date,
    query   String
)
ENGINE = {{engine "ReplacingMergeTree" "user_queries"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, user_id, query, day)
{{ttl "day"}}
{{distributed "user_queries" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.user_queries_mv{{.OnCluster}} TO {{table "user_queries"}}
AS SELECT
    app_id,
    user_id,
    toDate(event_time) AS day,
    query_normalized AS query
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, user_id, day, query;
-- unanswered_daily filters with the personal-data pattern of this
-- release: a view with it replaces migration 8's (the states it writes
-- are of distinct events, so the moment both run counts nothing twice),
-- and the rows the older pattern let through go.
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.unanswered_daily_private_mv{{.OnCluster}} TO {{table "unanswered_daily"}}
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
DROP TABLE IF EXISTS {{.DB}}.unanswered_daily_mv{{.OnCluster}}
{{- if or (not .Cluster) .SkipIndexes}};
ALTER TABLE {{table "unanswered_daily"}}{{.OnCluster}} DELETE WHERE match(query, {{.PrivatePattern}})
{{- end}}
