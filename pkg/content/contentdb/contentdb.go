// Package contentdb is the content.Store of a SQL database (package
// sqldb), one implementation for SQLite and PostgreSQL: every command takes
// one setting, a postgres:// or postgresql:// URL for PostgreSQL, shared
// by any number of replicas, or else the path of a SQLite file, for a
// single node. Organizations, apps and tokens are tenancydb's; this
// package adds the content records, bundles and stored vectors.
package contentdb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// Store is what Open returns.
type Store interface {
	content.Store
	Ping(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int, error)

	// LoadVectors returns the vectors stored for the app and model among
	// hashes (each the SHA-256 of what was embedded, as the caller
	// defines it), and marks them used now. Hashes without a vector, or
	// whose stored bytes are not finite float32s, are absent from the map.
	LoadVectors(ctx context.Context, app, model string, hashes [][32]byte) (map[[32]byte][]float32, error)
	// SaveVectors stores vectors for the app and model, replacing those
	// under the same hashes, and marks them used now. The app must exist;
	// vectors must be non-empty and finite. A save that fails may have
	// stored some of them.
	SaveVectors(ctx context.Context, app, model string, vectors map[[32]byte][]float32) error
	// The gap inbox's decisions and settings (gaps.go).
	DecideGap(ctx context.Context, d content.GapDecision) (content.GapDecision, error)
	CheckGapDecision(ctx context.Context, d content.GapDecision) error
	ReopenGap(ctx context.Context, app, group string) error
	GapDecisions(ctx context.Context, app string) ([]content.GapDecision, error)
	GapSettings(ctx context.Context, app string) (content.GapSettings, error)
	SetGapSettings(ctx context.Context, app string, g content.GapSettings) error
	// Drafts and published versions (publish.go).
	Live(ctx context.Context, app string) (revision, version int64, err error)
	Publishing(ctx context.Context, app string) (content.Publishing, error)
	SetPublishing(ctx context.Context, app string, on bool) (content.Publishing, error)
	Publish(ctx context.Context, app string) (content.Version, bool, error)
	PublishRecords(ctx context.Context, app string, kind content.Kind, ids []string, revisions []int64) (content.Version, bool, error)
	Rollback(ctx context.Context, app string, number int64) (content.Version, error)
	Versions(ctx context.Context, app string, before int64, limit int) ([]content.Version, error)
	VersionRecords(ctx context.Context, app string, version int64, kind content.Kind) ([]content.Record, error)
	VersionRecord(ctx context.Context, app string, version int64, kind content.Kind, id string) (content.Record, error)
	DraftDiff(ctx context.Context, app string) (content.DraftDiff, error)
	// Webhooks and their outbox (webhooks.go).
	CreateWebhook(ctx context.Context, w webhooks.Webhook) (webhooks.Webhook, error)
	Webhook(ctx context.Context, app, id string) (webhooks.Webhook, error)
	Webhooks(ctx context.Context, app string) ([]webhooks.Webhook, error)
	UpdateWebhook(ctx context.Context, app, id string, change func(*webhooks.Webhook) error) (webhooks.Webhook, error)
	DeleteWebhook(ctx context.Context, app, id string) error
	RotateWebhookSecret(ctx context.Context, app, id string, overlap time.Duration) (webhooks.Webhook, error)
	EnqueueWebhookEvent(ctx context.Context, app, topic string, payload []byte) (int, error)
	Deliveries(ctx context.Context, f webhooks.DeliveryFilter) ([]webhooks.Delivery, error)
	Redeliver(ctx context.Context, app string, id int64) (webhooks.Delivery, error)
	WebhooksFor(ctx context.Context, topic string) ([]webhooks.Webhook, error)
	TellWebhook(ctx context.Context, app, webhook, topic string, keys []string, payload func(fresh []string) ([]byte, error)) (int, error)
	webhooks.Store
	// PruneVectors deletes the app's vectors of the model neither saved
	// nor loaded since unusedSince, and returns how many.
	PruneVectors(ctx context.Context, app, model string, unusedSince time.Time) (int, error)
}

// DB is the content store of a SQL database. It is safe for concurrent
// use, and several processes may open the same database.
type DB struct {
	*tenancydb.Store
	db *sqldb.DB
	// Ready for the lookups made on most requests, and the statements of
	// single-record writes.
	recordStmt, revisionStmt                     *sqldb.Stmt
	lockStmt, insertStmt, updateStmt, deleteStmt *sqldb.Stmt
	// recordColumns is the columns a record is read from.
	recordColumns string
}

var _ Store = (*DB)(nil)

// watching is the store of a database that tells of changes made by other
// processes (PostgreSQL), for the api's replicas.
type watching struct{ *DB }

// WatchRevisions calls changed with an app's ID each time another
// transaction created the app or moved its revision; see
// sqldb.DB.WatchRevisions.
func (w watching) WatchRevisions(ctx context.Context, changed func(appID string), failed func(error)) error {
	return w.db.WatchRevisions(ctx, changed, failed)
}

// Open opens the database dsn names (see sqldb.Open) and brings its
// schema up to date. The store of a PostgreSQL database also has
// WatchRevisions. Errors never repeat a PostgreSQL URL, which may hold a
// password.
func Open(ctx context.Context, dsn string) (Store, error) {
	db, err := OpenDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if db.db.Engine() == sqldb.Postgres {
		return watching{db}, nil
	}
	return db, nil
}

// OpenDB is Open, returning the store itself.
func OpenDB(ctx context.Context, dsn string) (*DB, error) {
	sdb, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, sdb)
	if err != nil {
		return nil, errors.Join(err, sdb.Close())
	}
	return s, nil
}

// New returns the content store of an open database; Close closes it.
func New(ctx context.Context, sdb *sqldb.DB) (*DB, error) {
	ts, err := tenancydb.New(ctx, sdb)
	if err != nil {
		return nil, err
	}
	s := &DB{Store: ts, db: sdb,
		recordColumns: `app_id, kind, id, doc, COALESCE(location, ''), created_at, updated_at, revision`}
	if s.recordStmt, err = sdb.Prepare(ctx, `SELECT `+s.recordColumns+` FROM records WHERE app_id = ? AND kind = ? AND id = ?`); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare record lookup: %w", err), ts.Close())
	}
	for _, p := range []struct {
		st    **sqldb.Stmt
		query string
	}{
		{&s.revisionStmt, `SELECT revision FROM apps WHERE id = ?`},
		{&s.lockStmt, `SELECT ` + s.recordColumns + ` FROM records WHERE app_id = ? AND kind = ? AND id = ?` + sdb.Lock(" FOR UPDATE")},
		{&s.insertStmt, `INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at, revision) VALUES (?, ?, ?, ` + sdb.DocMark() + `, ?, ?, ?, ?)`},
		{&s.updateStmt, `UPDATE records SET doc = ` + sdb.DocMark() + `, location = ?, updated_at = ?, revision = ? WHERE app_id = ? AND kind = ? AND id = ?`},
		{&s.deleteStmt, `DELETE FROM records WHERE app_id = ? AND kind = ? AND id = ? RETURNING ` + s.recordColumns},
	} {
		if *p.st, err = sdb.Prepare(ctx, p.query); err != nil {
			return nil, errors.Join(fmt.Errorf("prepare %q: %w", p.query, err), s.closeStmts(), ts.Close())
		}
	}
	return s, nil
}

// SQL is the store's database.
func (s *DB) SQL() *sqldb.DB { return s.db }

// SchemaVersion returns the highest schema migration applied.
func (s *DB) SchemaVersion(ctx context.Context) (int, error) { return s.db.SchemaVersion(ctx) }

// Close releases the database. Calling it again returns the first result.
func (s *DB) Close() error {
	return errors.Join(s.closeStmts(), s.Store.Close(), s.db.Close())
}

// closeStmts closes the statements prepared so far.
func (s *DB) closeStmts() error {
	var errs []error
	for _, st := range []*sqldb.Stmt{s.recordStmt, s.revisionStmt, s.lockStmt, s.insertStmt, s.updateStmt, s.deleteStmt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (s *DB) scanRecord(r sqldb.Scanner) (content.Record, error) {
	var (
		rec  content.Record
		kind string
		doc  []byte
	)
	created, updated := s.db.NewTime(false), s.db.NewTime(false)
	dests := append([]any{&rec.AppID, &kind, &rec.ID, &doc, &rec.Location}, created.Dests()...)
	dests = append(dests, updated.Dests()...)
	if err := r.Scan(append(dests, &rec.Revision)...); err != nil {
		return content.Record{}, err
	}
	rec.Kind = content.Kind(kind)
	var err error
	if rec.Doc, err = s.db.ReadDoc(doc); err != nil {
		return content.Record{}, fmt.Errorf("%s %q doc: %w", kind, rec.ID, err)
	}
	if rec.CreatedAt, err = created.Value(); err != nil {
		return content.Record{}, fmt.Errorf("%s %q created_at: %w", kind, rec.ID, err)
	}
	if rec.UpdatedAt, err = updated.Value(); err != nil {
		return content.Record{}, fmt.Errorf("%s %q updated_at: %w", kind, rec.ID, err)
	}
	return rec, nil
}

// Record implements content.Store.
func (s *DB) Record(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error) {
	return s.record(s.recordStmt.QueryRowContext(ctx, appID, string(kind), id), appID, kind, id)
}

// record reads the record row asked for with appID, kind and id.
func (s *DB) record(row *sql.Row, appID string, kind content.Kind, id string) (content.Record, error) {
	rec, err := s.scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return content.Record{}, fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
	}
	if err != nil {
		return content.Record{}, fmt.Errorf("get %s %q of app %q: %w", kind, id, appID, err)
	}
	return rec, nil
}

// ListRecords implements content.Store.
func (s *DB) ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error) {
	return s.listRecords(ctx, s.db.SQL(), appID, kind)
}

func (s *DB) listRecords(ctx context.Context, q sqldb.Querier, appID string, kind content.Kind) ([]content.Record, error) {
	rows, err := q.QueryContext(ctx, s.db.Q(`SELECT `+s.recordColumns+` FROM records WHERE app_id = ? AND kind = ? ORDER BY id`), appID, string(kind))
	if err != nil {
		return nil, fmt.Errorf("list %ss of app %q: %w", kind, appID, err)
	}
	recs, err := sqldb.Collect(rows, s.scanRecord)
	if err != nil {
		return nil, fmt.Errorf("list %ss of app %q: %w", kind, appID, err)
	}
	return recs, nil
}

// Revision implements content.Store.
func (s *DB) Revision(ctx context.Context, appID string) (int64, error) {
	var rev int64
	err := s.revisionStmt.QueryRowContext(ctx, appID).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("app %q: %w", appID, content.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read revision of app %q: %w", appID, err)
	}
	return rev, nil
}

// write runs fn in a transaction that first moves the app's revision,
// announced on commit (and not at all on rollback), and writes e, the
// audit entry of the write to record kind/id. Locking the app row before
// any record is the lock order Import keeps too; it also serializes
// writes to one app.
func (s *DB) write(ctx context.Context, appID string, kind content.Kind, id, what string, e tenancy.AuditEntry, fn func(tx *sql.Tx, m tenancydb.Moved) error) error {
	e.Subject = string(kind) + "/" + id
	return s.db.InTx(ctx, what, func(tx *sql.Tx) error {
		m, found, err := s.MoveAndAudit(ctx, tx, appID, e)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("app %q: %w", appID, content.ErrNotFound)
		}
		return fn(tx, m)
	})
}

// CreateRecord implements content.Store.
func (s *DB) CreateRecord(ctx context.Context, r content.Record) (content.Record, error) {
	err := s.write(ctx, r.AppID, r.Kind, r.ID, fmt.Sprintf("create %s %q", r.Kind, r.ID), tenancy.AuditEntry{Operation: "createRecord", Created: 1}, func(tx *sql.Tx, m tenancydb.Moved) error {
		// Taken holding the app's lock, so that its changes' times are in
		// the order of their revisions.
		now := s.db.Now()
		r.CreatedAt, r.UpdatedAt, r.Revision = now, now, m.Revision
		at := s.db.TimeArgs(now, false)[0]
		_, err := s.insertStmt.ExecIn(ctx, tx, r.AppID, string(r.Kind), r.ID, sqldb.DocArg(r.Doc), sqldb.NullString(r.Location), at, at, r.Revision)
		switch {
		case sqldb.IsDuplicate(err):
			return fmt.Errorf("%s %q of app %q: %w", r.Kind, r.ID, r.AppID, content.ErrConflict)
		case sqldb.IsForeignKey(err):
			return fmt.Errorf("app %q: %w", r.AppID, content.ErrNotFound)
		case err != nil:
			return fmt.Errorf("create %s %q: %w", r.Kind, r.ID, err)
		}
		return nil
	})
	if err != nil {
		return content.Record{}, err
	}
	return r, nil
}

// UpdateRecord implements content.Store. The record is locked from the
// read to the write (the whole file on SQLite, the row on PostgreSQL), so
// concurrent read-modify-writes apply one after another and lose nothing.
func (s *DB) UpdateRecord(ctx context.Context, appID string, kind content.Kind, id string, ifRevision int64, change func(content.Record) (content.Record, error)) (content.Record, error) {
	var out content.Record
	// Counted as an update, unless it turns out to change nothing.
	e := tenancy.AuditEntry{Operation: "updateRecord", Updated: 1}
	err := s.write(ctx, appID, kind, id, fmt.Sprintf("update %s %q", kind, id), e, func(tx *sql.Tx, m tenancydb.Moved) error {
		cur, err := s.record(s.lockStmt.QueryRowIn(ctx, tx, appID, string(kind), id), appID, kind, id)
		if err != nil {
			return err
		}
		if err := content.CheckRevision(cur, ifRevision); err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.Kind, next.AppID, next.ID, next.CreatedAt = kind, appID, id, cur.CreatedAt
		if bytes.Equal(next.Doc, cur.Doc) && next.Location == cur.Location {
			// Nothing to keep a revision of.
			out = cur
			return s.Counted(ctx, tx, m.Audit, 0, 0, 0, 1)
		}
		next.UpdatedAt, next.Revision = s.db.Now(), m.Revision
		if _, err := s.updateStmt.ExecIn(ctx, tx,
			sqldb.DocArg(next.Doc), sqldb.NullString(next.Location), s.db.TimeArgs(next.UpdatedAt, false)[0], next.Revision, appID, string(kind), id); err != nil {
			return fmt.Errorf("update %s %q: %w", kind, id, err)
		}
		out = next
		return nil
	})
	return out, err
}

// DeleteRecord implements content.Store. The deletion is the record's
// last revision, which keeps what it held.
func (s *DB) DeleteRecord(ctx context.Context, appID string, kind content.Kind, id string, ifRevision int64) (content.Record, error) {
	var out content.Record
	err := s.write(ctx, appID, kind, id, fmt.Sprintf("delete %s %q", kind, id), tenancy.AuditEntry{Operation: "deleteRecord", Deleted: 1}, func(tx *sql.Tx, m tenancydb.Moved) error {
		cur, err := s.record(s.deleteStmt.QueryRowIn(ctx, tx, appID, string(kind), id), appID, kind, id)
		if err != nil {
			return err
		}
		// A stale deletion fails, and rolls back with it.
		if err := content.CheckRevision(cur, ifRevision); err != nil {
			return err
		}
		out = cur
		return nil
	})
	return out, err
}

// Export implements content.Store. On PostgreSQL it reads in one
// read-only snapshot, so the bundle is consistent even while others write.
func (s *DB) Export(ctx context.Context, f content.ExportFilter) (*content.Bundle, error) {
	var b content.Bundle
	err := s.db.InSnapshot(ctx, func(q sqldb.Querier) error {
		var err error
		if b.Apps, err = s.FindApps(ctx, q, f.OrganizationID, f.AppID); err != nil {
			return err
		}
		orgs := map[string]bool{}
		for _, a := range b.Apps {
			if !orgs[a.OrganizationID] {
				orgs[a.OrganizationID] = true
				o, err := s.OrganizationIn(ctx, q, a.OrganizationID)
				if err != nil {
					return err
				}
				b.Organizations = append(b.Organizations, o)
			}
		}
		switch {
		case f.AppID == "" && f.OrganizationID != "" && len(b.Organizations) == 0:
			// An organization without apps is still exported.
			o, err := s.OrganizationIn(ctx, q, f.OrganizationID)
			if err != nil {
				return err
			}
			b.Organizations = append(b.Organizations, o)
		case f.AppID == "" && f.OrganizationID == "":
			if b.Organizations, err = s.ListOrganizationsIn(ctx, q); err != nil {
				return err
			}
		}
		for _, a := range b.Apps {
			for _, k := range content.Kinds() {
				recs, err := s.listRecords(ctx, q, a.ID, k)
				if err != nil {
					return err
				}
				b.Records = append(b.Records, recs...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &b, nil
}
