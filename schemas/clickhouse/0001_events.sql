-- Runtime events as analysts query them: one row per event, typed columns
-- for the envelope and for REQUEST_RESPONSE payloads, everything else kept
-- as JSON text. Rows of a retried batch carry the same event ID and the
-- same event time, so ReplacingMergeTree collapses them (use FINAL or
-- uniqExact(event_id) for exact counts before merges have run).
CREATE TABLE IF NOT EXISTS {{table "events"}}{{.OnCluster}}
(
    event_id            String,
    app_id              LowCardinality(String),
    organization_id     LowCardinality(String),
    -- The runtime's isoTime when it sent one near received_at, else
    -- received_at (see migration 9).
    event_time          {{.Time}},
    received_at         {{.Time}},
    type                LowCardinality(String),
    name                LowCardinality(String),
    session_id          String,
    user_id             String,
    channel             LowCardinality(String),
    platform            LowCardinality(String),
    selected_handler    LowCardinality(String),
    current_handler     LowCardinality(String),
    environment         LowCardinality(String),
    request_type        LowCardinality(String),
    intent_id           LowCardinality(String),
    raw_query           String{{.Codec}},
    -- raw_query trimmed, white space collapsed, lower case: what
    -- query_counts counts. Writers compute it (the consumer does, in Go, so
    -- that the server need not); the default covers those that do not.
    query_normalized    String DEFAULT lowerUTF8(replaceRegexpAll(replaceRegexpAll(raw_query, '^\\s+|\\s+$', ''), '\\s+', ' ')),
    match_confidence    Nullable(Float32),
    output_display_text String{{.Codec}},
    output_ssml         String{{.Codec}},
    display_count       UInt16,
    tag                 String,
{{- if .Cluster}}
    -- In a cluster, the columns migration 4 adds elsewhere are here from
    -- the start (see there).
    tags                Array(String),
    error_message       String{{.Codec}},
    error_stack         String{{.Codec}},
    message             String{{.Codec}},
    kb_used             UInt8,
    kb_documents        UInt16,
    kb_faqs             UInt16,
    event_time_source   {{.TimeSource}},
    runtime_time        Nullable({{.Time}}),
    token_id            LowCardinality(String),
    client_network      String,
{{- end}}
    payload             String{{.Codec}},
    extra               String{{.Codec}},
    kafka_partition     UInt16,
    kafka_offset        UInt64
{{- if and .Cluster .SkipIndexes}},
    -- See migration 7.
    INDEX session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 2,
    INDEX user_idx user_id TYPE bloom_filter(0.01) GRANULARITY 2
{{- end}}
)
ENGINE = {{engine "ReplacingMergeTree" "events"}}
PARTITION BY toYYYYMM(event_time)
ORDER BY (app_id, toDate(event_time), event_id)
{{.TTL}}
{{distributed "events" true}}
