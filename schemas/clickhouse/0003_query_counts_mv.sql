CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_mv TO {{.DB}}.query_counts
AS SELECT
    app_id,
    channel,
    query_normalized AS query,
    toUInt64(1) AS asked
FROM {{.DB}}.events
WHERE query_normalized != ''
