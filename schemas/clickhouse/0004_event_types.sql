-- Columns for every event type the reference client sends: the tags it
-- puts at an event's top level, ERROR messages and stacks, MessageEvent
-- text, and what a turn got from the knowledge base. One column per
-- statement, so that a server without ADD COLUMN IF NOT EXISTS can be
-- told apart from a column added already by another consumer. A cluster's
-- tables have these columns from migration 1: ClickHouse 18.x servers can
-- abort while two replicas of a shard run one ALTER ON CLUSTER, and no
-- cluster table predates this migration.
{{- if not .Cluster}}
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} tags Array(String) AFTER tag;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} error_message String{{.Codec}} AFTER tags;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} error_stack String{{.Codec}} AFTER error_message;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} message String{{.Codec}} AFTER error_stack;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} kb_used UInt8 AFTER message;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} kb_documents UInt16 AFTER kb_used;
ALTER TABLE {{table "events"}} ADD COLUMN{{.IfNotExists}} kb_faqs UInt16 AFTER kb_documents
{{- end}}
