// Package content holds the apps' content (intents, handlers, entities,
// FAQs and knowledge-base documents), the bundles that move it, and the
// Store contract every backend implements. Who owns the content and who
// may read or change it is package tenancy's.
package content

import (
	"context"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// Errors returned by every Store implementation: tenancy's, as one store
// keeps both. Callers test them with errors.Is; implementations wrap them
// with detail.
var (
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = tenancy.ErrNotFound
	// ErrConflict means a record with the same identifier already exists.
	ErrConflict = tenancy.ErrConflict
)

// Store is the content database. Implementations must be safe for
// concurrent use and must pass the suite in package contenttest.
type Store interface {
	tenancy.Store

	// Record returns one content record of an app.
	Record(ctx context.Context, appID string, kind Kind, id string) (Record, error)
	// ListRecords returns the app's records of one kind ordered by ID.
	ListRecords(ctx context.Context, appID string, kind Kind) ([]Record, error)
	// Revision is a number that changes whenever the app or any of its
	// records changes, so that readers can tell when a cache is stale.
	Revision(ctx context.Context, appID string) (int64, error)
	// Import upserts a bundle in one transaction: either all of it is
	// applied or, on error, nothing. Records equal to what is stored are
	// left alone (their updatedAt does not move). progress, when not nil,
	// is called with the number of items written so far.
	Import(ctx context.Context, b *Bundle, progress func(done int)) (ImportStats, error)
	// Export returns the organizations, apps and records matching f, in
	// the order listings use.
	Export(ctx context.Context, f ExportFilter) (*Bundle, error)

	// CreateRecord stores a new record and returns it with its times. It
	// fails with ErrConflict when the app already has a record of that kind
	// and ID, and with ErrNotFound when the app does not exist.
	CreateRecord(ctx context.Context, r Record) (Record, error)
	// UpdateRecord replaces a record with what change makes of it, reading
	// and writing in one transaction; an error from change aborts it. It
	// fails with ErrNotFound when there is no such record.
	UpdateRecord(ctx context.Context, appID string, kind Kind, id string, change func(Record) (Record, error)) (Record, error)
	// DeleteRecord removes a record and returns it as it was. It fails
	// with ErrNotFound when there is no such record.
	DeleteRecord(ctx context.Context, appID string, kind Kind, id string) (Record, error)

	Close() error
}
