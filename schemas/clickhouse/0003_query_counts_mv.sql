CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_mv{{.OnCluster}} TO {{table "query_counts"}}
AS SELECT
    app_id,
    channel,
    query_normalized AS query,
    toUInt64(1) AS asked
FROM {{table "events"}}
WHERE query_normalized != ''
