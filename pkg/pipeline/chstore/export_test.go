package chstore

import (
	"context"
	"strings"
)

// The external tests of the package see these through chstore.

// TLSNames are the settings TLS errors name.
var TLSNames = tlsNames

// InsertEventsInto lets the external benchmarks insert into a cluster's
// shard-local table, to compare with inserting through the Distributed one.
var InsertEventsInto = (*Store).insertEvents

// InsertEventsBeforeArrivalRank inserts into an events table made before
// migration 13, which lacks arrival_rank, as consumers of earlier
// releases did.
func (s *Store) InsertEventsBeforeArrivalRank(ctx context.Context, b *EventBatch) error {
	return s.insertEventColumns(ctx, "events", strings.TrimSuffix(EventColumns, ", arrival_rank"), b)
}
