package content

import (
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// Revision is one state a record (or, of kind KindApp, the app itself) has
// had: what a write made of it, or, for a deletion, what it held when it
// was deleted.
type Revision struct {
	AppID string
	Kind  Kind
	ID    string
	// Revision is the app's revision the change made (see
	// Record.Revision).
	Revision int64
	Deleted  bool
	// Doc is the record as Record.Doc holds it; for KindApp, the app's
	// fields with its name.
	Doc       []byte
	Location  string
	ChangedAt time.Time
	// AuditID is the audit entry of the operation that made it.
	AuditID int64
}

// MaxHistoryPage bounds the revisions or audit entries one read returns.
const MaxHistoryPage = 1000

// MaxHistoryBytes bounds the documents of one page of revisions: a page
// ends once they reach it (it holds one revision at least), and the next
// is asked for with the last revision as before.
const MaxHistoryBytes = 8 << 20

// AuditFilter narrows an app's audit log. Empty fields match everything.
type AuditFilter struct {
	AppID string
	// From and To bound when (From included, To excluded).
	From, To time.Time
	// TokenID or LocalUser is who.
	TokenID, LocalUser string
	Operation          string
	// Kind and ID name a record: the operations that changed it.
	Kind Kind
	ID   string
	// Before is an entry's ID: the page after it, newest first; zero for
	// the newest.
	Before int64
	// Limit is at most MaxHistoryPage; zero means that.
	Limit int
}

// AuditEntry is an entry of the audit log.
type AuditEntry = tenancy.AuditEntry

// Pruned counts what retention removed: revisions, audit entries,
// published versions and webhook deliveries done with.
type Pruned struct {
	Revisions, Entries, Versions, Deliveries int
}

// Retention defaults: revisions and audit entries older than
// DefaultRetention go, except each record's DefaultKeepRevisions newest.
const (
	DefaultRetention     = 90 * 24 * time.Hour
	DefaultKeepRevisions = 10
)
