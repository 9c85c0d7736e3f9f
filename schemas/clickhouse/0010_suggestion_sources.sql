-- What HISTORICAL suggestions read, in place of query_users: per app,
-- channel, day and normalised query, how often it was asked and by how
-- many distinct users, sessions and sources, a source being an access
-- token and a client network as the server saw them (see migration 9).
-- User and session IDs are whatever a runtime claims; sources are not, so
-- one sender inventing users cannot make a query look popular. Only
-- events with a user, a session and a source are counted, and never
-- queries that look like they hold personal data. Days are of the
-- server-trusted event_time. Rows are kept HISTORY_DAYS days, and never
-- longer than events (RETENTION_DAYS), where the server has TTL.
CREATE TABLE IF NOT EXISTS {{table "query_sources"}}{{.OnCluster}}
(
    app_id   LowCardinality(String),
    channel  LowCardinality(String),
    day      Date,
    query    String,
    asked    AggregateFunction(count),
    users    AggregateFunction(uniq, String),
    sessions AggregateFunction(uniq, String),
    sources  AggregateFunction(uniq, String, String)
)
ENGINE = {{engine "AggregatingMergeTree" "query_sources"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day, query)
{{.HistoryTTL}}
{{countEveryInsert}}
{{distributed "query_sources" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_sources_mv{{.OnCluster}} TO {{table "query_sources"}}
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
-- query_users counted the users runtimes claim and days they chose; its
-- rows cannot say who sent them, so they go.
DROP TABLE IF EXISTS {{.DB}}.query_users_mv{{.OnCluster}};
DROP TABLE IF EXISTS {{.DB}}.query_users{{.OnCluster}}
{{- if .Cluster}};
DROP TABLE IF EXISTS {{table "query_users"}}{{.OnCluster}}
{{- end}};
-- Texts operators keep out of HISTORICAL suggestions, per app and channel
-- ('' for every channel of the app): the latest row (highest version) of
-- an app, channel and query says whether it is blocked. Written by
-- "consumer block-suggestion" and "consumer unblock-suggestion".
CREATE TABLE IF NOT EXISTS {{table "suggestion_blocks"}}{{.OnCluster}}
(
    app_id     String,
    channel    String,
    query      String,
    blocked    UInt8,
    version    UInt64,
    changed_at DateTime('UTC')
)
ENGINE = {{engine "ReplacingMergeTree" "suggestion_blocks" "version"}}
ORDER BY (app_id, channel, query)
{{distributed "suggestion_blocks" false}}
