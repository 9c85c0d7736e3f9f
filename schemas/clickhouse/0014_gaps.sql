-- What an app's assistant could not answer, per normalised question and
-- day, read by the gap inbox: turns that fell back ('fallback'),
-- knowledge-base turns that found neither a document nor an FAQ
-- ('knowledge_base'), and turns matched with a confidence below 0.9
-- ('low_confidence', in bands of 0.05: band is floor(confidence × 20),
-- the Float32 confidence rounded to 6 places first, so that 0.7 is in
-- band 14), so that each app's inbox applies its own threshold, up to
-- 0.9, to the same rows. A turn that is several of these counts under the
-- first. Questions longer than 500 bytes are not kept: no one asks them,
-- and a few would make an inbox large.
-- Counts are of distinct event IDs and users; first_seen and last_seen
-- are the first and last such turn, to the second. Queries that look like
-- they hold personal data are not kept, as in unanswered_daily.
CREATE TABLE IF NOT EXISTS {{table "gap_daily"}}{{.OnCluster}}
(
    app_id     LowCardinality(String),
    day        Date,
    query      String,
    reason     String,
    band       UInt8,
    asked      AggregateFunction(uniq, String),
    users      AggregateFunction(uniqIf, String, UInt8),
    first_seen AggregateFunction(min, DateTime('UTC')),
    last_seen  AggregateFunction(max, DateTime('UTC'))
)
ENGINE = {{engine "AggregatingMergeTree" "gap_daily"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, day, query, reason, band)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "gap_daily" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.gap_daily_mv{{.OnCluster}} TO {{table "gap_daily"}}
AS SELECT
    app_id,
    toDate(event_time) AS day,
    query_normalized AS query,
    multiIf({{fallback}}, 'fallback', {{knowledgeBaseEmpty}}, 'knowledge_base', 'low_confidence') AS reason,
    toUInt8(if(reason = 'low_confidence', floor(round(toFloat64(ifNull(match_confidence, 0)), 6) * 20), 0)) AS band,
    uniqState(event_id) AS asked,
    uniqIfState(user_id, user_id != '') AS users,
    minState(toDateTime(event_time, 'UTC')) AS first_seen,
    maxState(toDateTime(event_time, 'UTC')) AS last_seen
FROM {{table "events"}}
WHERE {{turn}} AND query_normalized != '' AND length(query_normalized) <= {{maxGapQueryBytes}}
  AND ({{fallback}} OR {{knowledgeBaseEmpty}} OR round(toFloat64(ifNull(match_confidence, 1)), 6) < {{maxGapThreshold}})
  AND NOT match(query_normalized, {{.PrivatePattern}})
GROUP BY app_id, day, query, reason, band;
