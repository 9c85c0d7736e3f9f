-- How often each normalised raw query was asked, per app and channel: the
-- source of HISTORICAL autocomplete suggestions. Counts come from inserts,
-- so a batch written twice before deduplication counts twice.
CREATE TABLE IF NOT EXISTS {{table "query_counts"}}{{.OnCluster}}
(
    app_id  LowCardinality(String),
    channel LowCardinality(String),
    query   String,
    asked   UInt64
)
ENGINE = {{engine "SummingMergeTree" "query_counts" "(asked)"}}
ORDER BY (app_id, channel, query)
{{countEveryInsert}}
{{distributed "query_counts" false}}
