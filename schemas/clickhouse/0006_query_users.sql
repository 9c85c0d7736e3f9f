-- What HISTORICAL suggestions read: per app, channel, day and normalised
-- query, how often it was asked and by which users (mergeable uniques),
-- so that a query is suggested only once enough distinct users asked it
-- within a window of days. Queries that look like they hold an email
-- address, a phone number, a long number or a URL, and queries without a
-- user, are never written here. Every non-key column is an aggregate
-- state, which AggregatingMergeTree merges on every server version.
CREATE TABLE IF NOT EXISTS {{table "query_users"}}{{.OnCluster}}
(
    app_id  LowCardinality(String),
    channel LowCardinality(String),
    day     Date,
    query   String,
    asked   AggregateFunction(count),
    users   AggregateFunction(uniq, String)
)
ENGINE = {{engine "AggregatingMergeTree" "query_users"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day, query)
{{.HistoryTTL}}
{{countEveryInsert}}
{{distributed "query_users" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_users_mv{{.OnCluster}} TO {{table "query_users"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    countState() AS asked,
    uniqState(user_id) AS users
FROM {{table "events"}}
WHERE query_normalized != '' AND user_id != '' AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, channel, day, query
