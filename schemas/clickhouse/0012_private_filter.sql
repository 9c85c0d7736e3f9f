-- The tables of asked queries filter with the personal-data pattern of
-- this release, which needs a value to refuse a personal fact ("my phone
-- number is 555 ...", not "my phone is broken"): a view with it replaces
-- each view of migrations 10 and 11, which keep the pattern they were
-- made with. Each new view is made before the old one goes, so no insert
-- finds neither; one that runs at that moment is counted by both, as a
-- retried batch is: once in the tables of distinct users and events,
-- twice in query_counts_daily and in query_sources' asked. No row is
-- deleted; the questions the older pattern refused are only in events.
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_sources_mv12{{.OnCluster}} TO {{table "query_sources"}}
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
DROP TABLE IF EXISTS {{.DB}}.query_sources_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_daily_mv12{{.OnCluster}} TO {{table "query_counts_daily"}}
AS SELECT
    app_id,
    channel,
    toDate(event_time) AS day,
    query_normalized AS query,
    toUInt64(1) AS asked
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}});
DROP TABLE IF EXISTS {{.DB}}.query_counts_daily_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.user_queries_mv12{{.OnCluster}} TO {{table "user_queries"}}
AS SELECT
    app_id,
    user_id,
    toDate(event_time) AS day,
    query_normalized AS query
FROM {{table "events"}}
WHERE query_normalized != '' AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, user_id, day, query;
DROP TABLE IF EXISTS {{.DB}}.user_queries_mv{{.OnCluster}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.unanswered_daily_mv12{{.OnCluster}} TO {{table "unanswered_daily"}}
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
DROP TABLE IF EXISTS {{.DB}}.unanswered_daily_private_mv{{.OnCluster}}
