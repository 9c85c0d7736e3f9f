CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.query_counts_mv TO {{.DB}}.query_counts
AS SELECT
    app_id,
    channel,
    lowerUTF8(replaceRegexpAll(replaceRegexpAll(raw_query, '^\\s+|\\s+$', ''), '\\s+', ' ')) AS query,
    toUInt64(1) AS asked
FROM {{.DB}}.events
WHERE raw_query != ''
