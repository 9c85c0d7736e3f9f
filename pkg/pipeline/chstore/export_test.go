package chstore

// The external tests of the package see these through chstore.

// TLSNames are the settings TLS errors name.
var TLSNames = tlsNames

// InsertEventsInto lets the external benchmarks insert into a cluster's
// shard-local table, to compare with inserting through the Distributed one.
var InsertEventsInto = (*Store).insertEvents
