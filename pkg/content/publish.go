package content

import (
	"context"
	"errors"
	"time"
)

// An app that publishes keeps two states of its content: the draft, which
// every write changes, and the live version, which its runtimes read. A
// publish makes the whole draft a new version and that version live; a
// rollback makes an earlier version live again. An app that does not
// publish has one state: its runtimes read what is written, at once.

// Version is one published state of an app's content.
type Version struct {
	AppID string
	// Number counts the app's versions from 1.
	Number int64
	// Revision is the app's revision the version published: its records
	// are as they were then.
	Revision    int64
	PublishedAt time.Time
	// AuditID is the entry of the publish that made it.
	AuditID int64
	Records int
	// Live says the app's runtimes read this version.
	Live bool
}

// Publishing is an app's state of publishing.
type Publishing struct {
	// On says the app publishes: its runtimes read version Live.
	On   bool
	Live int64
}

// ErrNotPublishing refuses publishing or rolling back an app that does
// not publish.
var ErrNotPublishing = errors.New("the app does not publish: turn publishing on first")

// MaxVersionsPage bounds the versions one read lists.
const MaxVersionsPage = 100

// DraftChange is one record that differs between the live version and the
// draft: added, changed (Fields say how) or removed.
type DraftChange struct {
	Kind Kind
	ID   string
	// Change is "added", "changed" or "removed".
	Change string
	// LiveRevision and DraftRevision are the record's revisions in each;
	// zero where it is absent.
	LiveRevision, DraftRevision int64
	Fields                      []FieldChange
}

// MaxDraftChanges bounds the records one difference lists, and
// MaxDraftDiffBytes the values of their fields (a list ends once they
// reach it); Truncated says there were more.
const (
	MaxDraftChanges   = 1000
	MaxDraftDiffBytes = 8 << 20
)

// DraftDiff is what publishing would change.
type DraftDiff struct {
	// Live is the version compared with, zero when the app does not
	// publish (every record is then live already).
	Live      int64
	Changes   []DraftChange
	Truncated bool
}

// RecordReader reads one state of an app's records: its draft (a Store)
// or a published version (AtVersion).
type RecordReader interface {
	Record(ctx context.Context, appID string, kind Kind, id string) (Record, error)
	ListRecords(ctx context.Context, appID string, kind Kind) ([]Record, error)
}

// VersionReader reads the records of published versions.
type VersionReader interface {
	VersionRecord(ctx context.Context, appID string, version int64, kind Kind, id string) (Record, error)
	VersionRecords(ctx context.Context, appID string, version int64, kind Kind) ([]Record, error)
}

// AtVersion reads version of an app's content from versions; version
// zero is the draft, which draft reads.
func AtVersion(draft RecordReader, versions VersionReader, version int64) RecordReader {
	if version == 0 {
		return draft
	}
	return atVersion{versions, version}
}

type atVersion struct {
	versions VersionReader
	version  int64
}

func (v atVersion) Record(ctx context.Context, appID string, kind Kind, id string) (Record, error) {
	return v.versions.VersionRecord(ctx, appID, v.version, kind, id)
}

func (v atVersion) ListRecords(ctx context.Context, appID string, kind Kind) ([]Record, error) {
	return v.versions.VersionRecords(ctx, appID, v.version, kind)
}
