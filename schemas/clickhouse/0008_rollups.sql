-- Rollups that materialized views keep as events are written, so that the
-- first questions of analysts read a few rows per day rather than every
-- event. Every count is of distinct event IDs (mergeable uniq states), so
-- a batch written twice (a client's retry, a consumer's redelivery) counts
-- once; uniq is exact up to about 65,000 values per row and within about
-- 1% beyond. A turn is a REQUEST_RESPONSE event; a fallback turn is one
-- whose request was INPUT_UNKNOWN_REQUEST or an intent request that
-- matched no intent; an error is an ERROR event. In a cluster every shard
-- aggregates its own rows and the Distributed tables merge the states.
CREATE TABLE IF NOT EXISTS {{table "app_daily"}}{{.OnCluster}}
(
    app_id               LowCardinality(String),
    channel              LowCardinality(String),
    day                  Date,
    events               AggregateFunction(uniq, String),
    conversations        AggregateFunction(uniqIf, String, UInt8),
    users                AggregateFunction(uniqIf, String, UInt8),
    turns                AggregateFunction(uniqIf, String, UInt8),
    fallback_turns       AggregateFunction(uniqIf, String, UInt8),
    knowledge_base_turns AggregateFunction(uniqIf, String, UInt8),
    errors               AggregateFunction(uniqIf, String, UInt8),
    confidence           AggregateFunction(avgIf, Float32, UInt8)
)
ENGINE = {{engine "AggregatingMergeTree" "app_daily"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "app_daily" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.app_daily_mv{{.OnCluster}} TO {{table "app_daily"}}
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
-- Per intent and day: matched turns, those matched with a confidence
-- below 0.5, and the mean confidence.
CREATE TABLE IF NOT EXISTS {{table "intent_daily"}}{{.OnCluster}}
(
    app_id               LowCardinality(String),
    channel              LowCardinality(String),
    day                  Date,
    intent_id            String,
    turns                AggregateFunction(uniq, String),
    low_confidence_turns AggregateFunction(uniqIf, String, UInt8),
    confidence           AggregateFunction(avgIf, Float32, UInt8)
)
ENGINE = {{engine "AggregatingMergeTree" "intent_daily"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day, intent_id)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "intent_daily" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.intent_daily_mv{{.OnCluster}} TO {{table "intent_daily"}}
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
-- What users asked that the assistant did not understand (fallback turns)
-- or matched with a confidence below 0.5, per normalised query and day,
-- with the distinct users who asked. Queries that look like they hold an
-- email address, a phone number, a long number or a URL are not kept.
CREATE TABLE IF NOT EXISTS {{table "unanswered_daily"}}{{.OnCluster}}
(
    app_id  LowCardinality(String),
    channel LowCardinality(String),
    day     Date,
    query   String,
    asked   AggregateFunction(uniq, String),
    users   AggregateFunction(uniqIf, String, UInt8)
)
ENGINE = {{engine "AggregatingMergeTree" "unanswered_daily"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, channel, day, query)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "unanswered_daily" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.unanswered_daily_mv{{.OnCluster}} TO {{table "unanswered_daily"}}
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
-- One row per session and day it was active (merge them with GROUP BY
-- session_id): its user and channel, first and last event, events and
-- turns, the handlers it visited, the last handler (where the user left)
-- and the outcome of its last turn or error: 'error', 'fallback' or
-- 'answered'. Events are ordered by time (milliseconds where the server
-- keeps them, else seconds), then, at the same instant, in the order a
-- turn sends them: a launch, other requests, the turn, then its errors
-- and end; so that on servers keeping seconds a launch and the turns in
-- its second do not tie.
CREATE TABLE IF NOT EXISTS {{table "sessions"}}{{.OnCluster}}
(
    app_id       LowCardinality(String),
    day          Date,
    session_id   String,
    user_id      AggregateFunction(anyIf, String, UInt8),
    channel      AggregateFunction(any, String),
    first_event  AggregateFunction(min, {{.Time}}),
    last_event   AggregateFunction(max, {{.Time}}),
    events       AggregateFunction(uniq, String),
    turns        AggregateFunction(uniqIf, String, UInt8),
    handlers     AggregateFunction(groupUniqArrayIf, String, UInt8),
    last_handler AggregateFunction(argMaxIf, String, UInt64, UInt8),
    outcome      AggregateFunction(argMaxIf, String, UInt64, UInt8)
)
ENGINE = {{engine "AggregatingMergeTree" "sessions"}}
PARTITION BY toYYYYMM(day)
ORDER BY (app_id, day, session_id)
{{ttl "day"}}
{{countEveryInsert}}
{{distributed "sessions" false}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.sessions_mv{{.OnCluster}} TO {{table "sessions"}}
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
GROUP BY app_id, day, session_id
