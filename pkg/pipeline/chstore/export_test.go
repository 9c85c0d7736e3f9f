package chstore

// TestStringColumns lets the external tests of the package insert as its
// own tests do.
var TestStringColumns = stringColumns

// InsertEventsInto lets the external benchmarks insert into a cluster's
// shard-local table, to compare with inserting through the Distributed one.
var InsertEventsInto = (*Store).insertEvents

// ShardOf is the shard of an event ID, as the Distributed tables choose it.
var ShardOf = shardOf
