-- Events ingest refused, one row each, with why: the event exactly as sent
-- (cut only when too large for one Kafka record), its first error's reason
-- and field, and every error as JSON. Rows of a retried batch carry the
-- same event ID, so ReplacingMergeTree collapses them. Resubmitted events
-- stay here; the events table tells which came back.
CREATE TABLE IF NOT EXISTS {{table "quarantine"}}{{.OnCluster}}
(
    received_at     {{.Time}},
    app_id          LowCardinality(String),
    organization_id LowCardinality(String),
    event_id        String,
    batch_index     UInt32,
    reason          LowCardinality(String),
    field           String,
    message         String,
    errors          String{{.Codec}},
    event           String{{.Codec}},
    event_bytes     UInt64,
    truncated       UInt8,
    kafka_partition UInt16,
    kafka_offset    UInt64
)
ENGINE = {{engine "ReplacingMergeTree" "quarantine"}}
PARTITION BY toYYYYMM(received_at)
ORDER BY (app_id, toDate(received_at), event_id)
{{ttl "received_at"}}
{{distributed "quarantine" true}}
