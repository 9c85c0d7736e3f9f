// Package content holds the apps' content (intents, handlers, entities,
// FAQs and knowledge-base documents), the bundles that move it, and the
// Store contract every backend implements. Who owns the content and who
// may read or change it is package tenancy's.
package content

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// ErrStale is what a *Stale error is (errors.Is).
var ErrStale = errors.New("changed since it was read")

// Stale refuses a write made from a read of an older revision of the
// record than its current one: the writer reads it again, and decides.
type Stale struct {
	Kind Kind
	ID   string
	// Current is the record's revision; Read the one the writer had.
	Current, Read int64
}

func (e *Stale) Error() string {
	return fmt.Sprintf("%s %q is at revision %d, not %d as read: read it again and reapply the change", e.Kind, e.ID, e.Current, e.Read)
}

// Is makes errors.Is(err, ErrStale) hold.
func (e *Stale) Is(target error) bool { return target == ErrStale }

// CheckRevision is the *Stale error of writing cur from a read of
// ifRevision; nil when ifRevision is zero (no precondition) or cur's.
func CheckRevision(cur Record, ifRevision int64) error {
	if ifRevision == 0 || ifRevision == cur.Revision {
		return nil
	}
	return &Stale{Kind: cur.Kind, ID: cur.ID, Current: cur.Revision, Read: ifRevision}
}

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
	// fails with ErrNotFound when there is no such record, and with a
	// *Stale error when ifRevision is not zero and not the record's
	// revision. A change that leaves the record as it was writes nothing.
	UpdateRecord(ctx context.Context, appID string, kind Kind, id string, ifRevision int64, change func(Record) (Record, error)) (Record, error)
	// DeleteRecord removes a record and returns it as it was. It fails
	// with ErrNotFound when there is no such record, and with a *Stale
	// error when ifRevision is not zero and not the record's revision.
	DeleteRecord(ctx context.Context, appID string, kind Kind, id string, ifRevision int64) (Record, error)

	// Revisions returns the states a record (or, of KindApp, the app)
	// has had, newest first: those below the revision before (zero: from
	// the newest), at most limit (zero: MaxHistoryPage), ending early
	// once their documents reach MaxHistoryBytes. A record never written
	// has none.
	Revisions(ctx context.Context, appID string, kind Kind, id string, before int64, limit int) ([]Revision, error)
	// AuditLog returns the entries of an app's audit log that f matches,
	// newest first.
	AuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// RestoreRecord makes a record what it was at one of its revisions
	// (a deletion deletes it; a deleted record comes back), as a new
	// change with its own revision and audit entry: history is never
	// rewritten. It returns the record's new state. It fails with
	// ErrNotFound when the record has no such revision, and with a *Stale
	// error when ifRevision is not zero and not the record's revision.
	RestoreRecord(ctx context.Context, appID string, kind Kind, id string, revision, ifRevision int64) (Revision, error)
	// RestoreApp makes every record of an app, and with appFields its
	// name and fields (channels and their keys included), what they were
	// at a time, in one transaction and one audit entry: records created
	// since are deleted, deleted ones come back, equal ones are left
	// alone. Readers see the app before or after, never a mix. It fails
	// with a Problem when the app's history before the time was pruned.
	RestoreApp(ctx context.Context, appID string, at time.Time, appFields bool) (ImportStats, error)
	// PruneHistory deletes revisions changed before the time, except each
	// record's newest keep (at least one: its current state), and audit
	// entries made before it that no kept revision names.
	PruneHistory(ctx context.Context, before time.Time, keep int) (Pruned, error)

	Close() error
}
