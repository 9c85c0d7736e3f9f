package contentdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// The records of an app are its draft; a version is the set of the
// records' revisions a publish found (version_records), whose documents
// are the revisions'. Publishing, rolling back and turning publishing on
// or off move the app's revision, as a write does, so that every reader's
// cache and every replica's sees the change as it sees writes.

// Live answers the app's revision and the version its runtimes read, zero
// when it does not publish: read together, so that what is read of the
// version belongs to the revision.
func (s *DB) Live(ctx context.Context, app string) (revision, version int64, err error) {
	var live sql.NullInt64
	err = s.db.SQL().QueryRowContext(ctx, s.db.Q(`SELECT revision, live_version FROM apps WHERE id = ?`), app).Scan(&revision, &live)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("app %q: %w", app, content.ErrNotFound)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read the live version of app %q: %w", app, err)
	}
	return revision, live.Int64, nil
}

// Publishing answers whether the app publishes, and its live version.
func (s *DB) Publishing(ctx context.Context, app string) (content.Publishing, error) {
	_, live, err := s.Live(ctx, app)
	return content.Publishing{On: live > 0, Live: live}, err
}

// lockLive locks the app's row for tx and answers its live version (zero:
// it does not publish) and its organization.
func (s *DB) lockLive(ctx context.Context, tx *sql.Tx, app string) (live int64, org string, err error) {
	var v sql.NullInt64
	err = tx.QueryRowContext(ctx, s.db.Q(`SELECT live_version, organization_id FROM apps WHERE id = ?`+s.db.Lock(" FOR UPDATE")), app).Scan(&v, &org)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("app %q: %w", app, content.ErrNotFound)
	}
	return v.Int64, org, err
}

// SetPublishing turns publishing on or off for the app. Turning it on
// publishes the draft as a new version, live at once, so that the
// runtimes keep reading what they read; turning it off makes them read
// the draft. Versions stay. Setting what is set already changes nothing
// and writes no audit entry.
func (s *DB) SetPublishing(ctx context.Context, app string, on bool) (content.Publishing, error) {
	var out content.Publishing
	err := s.db.InTx(ctx, "set publishing", func(tx *sql.Tx) error {
		live, _, err := s.lockLive(ctx, tx, app)
		if err != nil {
			return err
		}
		if (live > 0) == on {
			out = content.Publishing{On: on, Live: live}
			return nil
		}
		if !on {
			// The revision moves first, so that only the draft's going
			// live tells the webhooks (content.changed).
			if _, err := s.move(ctx, tx, app, "stopPublishing", "app/"+app); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, s.db.Q(`UPDATE apps SET live_version = NULL WHERE id = ?`), app)
			out = content.Publishing{}
			return err
		}
		added, _, _, err := s.draftCounts(ctx, tx, app, 0)
		if err != nil {
			return err
		}
		v, err := s.publishIn(ctx, tx, app, "startPublishing", added, 0, 0, draftSource, app)
		out = content.Publishing{On: true, Live: v.Number}
		return err
	})
	if err != nil {
		return content.Publishing{}, fmt.Errorf("set publishing of app %q: %w", app, err)
	}
	return out, nil
}

// Publish makes the app's draft a new version, live at once, in one
// transaction and one audit entry (operation publish, counting the
// records added, changed and removed). When the draft is what is live it
// writes nothing and answers the live version with published false. It
// fails with content.ErrNotPublishing when the app does not publish.
func (s *DB) Publish(ctx context.Context, app string) (v content.Version, published bool, err error) {
	err = s.db.InTx(ctx, "publish", func(tx *sql.Tx) error {
		live, _, err := s.lockLive(ctx, tx, app)
		if err != nil {
			return err
		}
		if live == 0 {
			return content.ErrNotPublishing
		}
		added, changed, removed, err := s.draftCounts(ctx, tx, app, live)
		if err != nil {
			return err
		}
		if added+changed+removed == 0 {
			v, err = s.version(ctx, tx, app, live, live)
			return err
		}
		v, err = s.publishIn(ctx, tx, app, "publish", added, changed, removed, draftSource, app)
		published = err == nil
		return err
	})
	if err != nil {
		return content.Version{}, false, fmt.Errorf("publish app %q: %w", app, err)
	}
	return v, published, nil
}

// PublishRecords makes the draft's state of some records of one kind
// live, and nothing else of the draft: a new version, the live one with
// those records as the draft holds them (added, changed, or removed where
// the draft has none), in one audit entry (operation publishRecords
// unless the context names one). A catalogue's automation publishes its
// own writes with it, not the other records authors have yet to publish.
// revisions, when not nil, are the records' revisions the caller wrote:
// a record changed since is refused with a *content.Stale error rather
// than published as another left it. When the live version already holds
// them so, it writes nothing and answers published false. It fails with
// content.ErrNotPublishing when the app does not publish.
func (s *DB) PublishRecords(ctx context.Context, app string, kind content.Kind, ids []string, revisions []int64) (v content.Version, published bool, err error) {
	if len(ids) == 0 || revisions != nil && len(revisions) != len(ids) {
		return content.Version{}, false, fmt.Errorf("publish records of app %q: %d records named, %d revisions", app, len(ids), len(revisions))
	}
	keys := make([]any, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, string(kind), id)
	}
	in := ` (VALUES ` + strings.TrimSuffix(strings.Repeat(`(?, ?), `, len(ids)), `, `) + `)`
	err = s.db.InTx(ctx, "publish records", func(tx *sql.Tx) error {
		live, _, err := s.lockLive(ctx, tx, app)
		if err != nil {
			return err
		}
		if live == 0 {
			return content.ErrNotPublishing
		}
		for i, want := range revisions {
			cur, err := s.record(tx.QueryRowContext(ctx, s.db.Q(`SELECT `+s.recordColumns+` FROM records WHERE app_id = ? AND kind = ? AND id = ?`), app, string(kind), ids[i]), app, kind, ids[i])
			if err != nil {
				return err
			}
			if err := content.CheckRevision(cur, want); err != nil {
				return err
			}
		}
		args := append(append([]any{live, app}, keys...), append([]any{app, live}, keys...)...)
		args = append(append(args, app, live), keys...)
		var added, changed, removed int
		if err := tx.QueryRowContext(ctx, s.db.Q(`SELECT
			(SELECT count(*) FROM records r LEFT JOIN version_records v ON v.app_id = r.app_id AND v.version = ? AND v.kind = r.kind AND v.id = r.id
				WHERE r.app_id = ? AND (r.kind, r.id) IN`+in+` AND v.id IS NULL),
			(SELECT count(*) FROM records r JOIN version_records v ON v.app_id = r.app_id AND v.kind = r.kind AND v.id = r.id
				WHERE r.app_id = ? AND v.version = ? AND (r.kind, r.id) IN`+in+` AND v.revision <> r.revision),
			(SELECT count(*) FROM version_records v WHERE v.app_id = ? AND v.version = ? AND (v.kind, v.id) IN`+in+`
				AND NOT EXISTS (SELECT 1 FROM records r WHERE r.app_id = v.app_id AND r.kind = v.kind AND r.id = v.id))`),
			args...).Scan(&added, &changed, &removed); err != nil {
			return fmt.Errorf("compare the records with version %d: %w", live, err)
		}
		if added+changed+removed == 0 {
			v, err = s.version(ctx, tx, app, live, live)
			return err
		}
		// The live version but the records named, and those as the
		// draft holds them.
		v, err = s.publishIn(ctx, tx, app, "publishRecords", added, changed, removed,
			`SELECT kind, id, revision, created_at FROM version_records WHERE app_id = ? AND version = ? AND (kind, id) NOT IN`+in+`
			UNION ALL
			SELECT kind, id, revision, created_at FROM records WHERE app_id = ? AND (kind, id) IN`+in,
			append(append([]any{app, live}, keys...), append([]any{app}, keys...)...)...)
		published = err == nil
		return err
	})
	if err != nil {
		return content.Version{}, false, fmt.Errorf("publish %ss of app %q: %w", kind, app, err)
	}
	return v, published, nil
}

// makeLive points the app at version, in tx. It comes before the
// revision moves: the database tells the app's webhooks of the new live
// version (content.published) and, with a live version set, not of the
// revision's move (content.changed).
func (s *DB) makeLive(ctx context.Context, tx *sql.Tx, app string, version int64) error {
	if _, err := tx.ExecContext(ctx, s.db.Q(`UPDATE apps SET live_version = ? WHERE id = ?`), version, app); err != nil {
		return fmt.Errorf("make version %d live: %w", version, err)
	}
	return nil
}

// move moves the app's revision and writes the audit entry of operation
// op on subject.
func (s *DB) move(ctx context.Context, tx *sql.Tx, app, op, subject string) (tenancydb.Moved, error) {
	m, found, err := s.MoveAndAudit(ctx, tx, app, tenancy.AuditEntry{Operation: op, Subject: subject})
	if err == nil && !found {
		err = fmt.Errorf("app %q: %w", app, content.ErrNotFound)
	}
	return m, err
}

// draftSource selects the draft's records, as publishIn takes them (the
// app its argument).
const draftSource = `SELECT kind, id, revision, created_at FROM records WHERE app_id = ?`

// publishIn writes a new version of the app and makes it live, in tx,
// which holds the app's row, with the audit entry of operation op
// counting the records it adds to the version live before, changes and
// removes. The version's records are those source selects (kind, id,
// revision and created_at, with args).
func (s *DB) publishIn(ctx context.Context, tx *sql.Tx, app, op string, added, changed, removed int, source string, args ...any) (content.Version, error) {
	var next int64
	if err := tx.QueryRowContext(ctx, s.db.Q(`SELECT COALESCE(max(version), 0) + 1 FROM versions WHERE app_id = ?`), app).Scan(&next); err != nil {
		return content.Version{}, fmt.Errorf("number the version: %w", err)
	}
	if err := s.makeLive(ctx, tx, app, next); err != nil {
		return content.Version{}, err
	}
	m, err := s.move(ctx, tx, app, op, fmt.Sprintf("version/%d", next))
	if err != nil {
		return content.Version{}, err
	}
	if err := s.Counted(ctx, tx, m.Audit, added, changed, removed, 0); err != nil {
		return content.Version{}, err
	}
	if _, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO versions (app_id, version, revision, published_at, audit_id, records) VALUES (?, ?, ?, ?, ?, 0)`),
		app, next, m.Revision, s.db.TimeArgs(s.db.Now(), false)[0], m.Audit); err != nil {
		return content.Version{}, fmt.Errorf("write version %d: %w", next, err)
	}
	res, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO version_records (app_id, version, kind, id, revision, created_at)
		SELECT ?, CAST(? AS bigint), kind, id, revision, created_at FROM (`+source+`) AS source`), append([]any{app, next}, args...)...)
	if err != nil {
		return content.Version{}, fmt.Errorf("write the records of version %d: %w", next, err)
	}
	n, err := res.RowsAffected()
	if err == nil {
		_, err = tx.ExecContext(ctx, s.db.Q(`UPDATE versions SET records = ? WHERE app_id = ? AND version = ?`), n, app, next)
	}
	if err != nil {
		return content.Version{}, fmt.Errorf("count the records of version %d: %w", next, err)
	}
	return s.version(ctx, tx, app, next, next)
}

// draftAgainstVersion pairs the app's draft (d) with a version of it
// (v) by record: arguments the app, the app and the version. A full join
// is answered by hashing or merging on PostgreSQL, whatever its
// statistics say: the nested loops it chooses for tables it believes
// small (just filled, not yet analyzed) took seconds for 10,000 records.
const draftAgainstVersion = `(SELECT kind, id, revision, doc FROM records WHERE app_id = ?) d
	FULL JOIN (SELECT kind, id, revision FROM version_records WHERE app_id = ? AND version = ?) v ON v.kind = d.kind AND v.id = d.id`

// revisionOf joins, as r, the revision of record the version row v names
// (in app appID, by kind, id and revision): on PostgreSQL as a lateral
// lookup, so that it is one index probe a row whatever the statistics
// say; on SQLite, whose planner probes the key anyway, as a join. left
// keeps rows of v without one.
func (s *DB) revisionOf(left bool, appID string) string {
	join := "JOIN"
	if left {
		join = "LEFT JOIN"
	}
	cond := `r.app_id = ` + appID + ` AND r.kind = v.kind AND r.id = v.id AND r.revision = v.revision`
	if s.db.Engine() == sqldb.Postgres {
		// LIMIT keeps the planner from pulling the lookup up into a join
		// it may plan as scans.
		return join + ` LATERAL (SELECT r.doc, r.location, r.changed_at FROM revisions r WHERE ` + cond + ` LIMIT 1) r ON true`
	}
	return join + ` revisions r ON ` + cond
}

// draftCounts counts the records the draft adds to version live, changes
// and removes from it; with live zero, every record is added.
func (s *DB) draftCounts(ctx context.Context, q sqldb.Querier, app string, live int64) (added, changed, removed int, err error) {
	query := `SELECT
		COALESCE(sum(CASE WHEN v.id IS NULL THEN 1 ELSE 0 END), 0),
		COALESCE(sum(CASE WHEN d.id IS NOT NULL AND v.id IS NOT NULL AND v.revision <> d.revision THEN 1 ELSE 0 END), 0),
		COALESCE(sum(CASE WHEN d.id IS NULL THEN 1 ELSE 0 END), 0)
		FROM ` + draftAgainstVersion
	if s.db.Engine() == sqldb.SQLite {
		// SQLite answers a full join of two subqueries by scanning one
		// for each row of the other; it probes keys for these instead.
		query = `SELECT
		(SELECT count(*) FROM records d WHERE d.app_id = ?1 AND NOT EXISTS (
			SELECT 1 FROM version_records v WHERE v.app_id = ?1 AND v.version = ?3 AND v.kind = d.kind AND v.id = d.id)),
		(SELECT count(*) FROM records d JOIN version_records v ON v.app_id = ?1 AND v.version = ?3 AND v.kind = d.kind AND v.id = d.id
			WHERE d.app_id = ?1 AND v.revision <> d.revision),
		(SELECT count(*) FROM version_records v WHERE v.app_id = ?1 AND v.version = ?3 AND NOT EXISTS (
			SELECT 1 FROM records d WHERE d.app_id = ?1 AND d.kind = v.kind AND d.id = v.id))`
	}
	err = q.QueryRowContext(ctx, s.db.Q(query), app, app, live).Scan(&added, &changed, &removed)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("compare the draft with version %d: %w", live, err)
	}
	return added, changed, removed, nil
}

// Rollback makes an earlier version of the app live again, in one audit
// entry (operation rollback). The draft is left as it is. Rolling back to
// the live version changes nothing. It fails with content.ErrNotFound
// when the app has no such version and with content.ErrNotPublishing
// when it does not publish.
func (s *DB) Rollback(ctx context.Context, app string, number int64) (content.Version, error) {
	var v content.Version
	err := s.db.InTx(ctx, "roll back", func(tx *sql.Tx) error {
		live, _, err := s.lockLive(ctx, tx, app)
		if err != nil {
			return err
		}
		if live == 0 {
			return content.ErrNotPublishing
		}
		if v, err = s.version(ctx, tx, app, number, number); err != nil || number == live {
			return err
		}
		if err := s.makeLive(ctx, tx, app, number); err != nil {
			return err
		}
		v.Live = true
		_, err = s.move(ctx, tx, app, "rollback", fmt.Sprintf("version/%d", number))
		return err
	})
	if err != nil {
		return content.Version{}, fmt.Errorf("roll app %q back to version %d: %w", app, number, err)
	}
	return v, nil
}

const versionColumns = `app_id, version, revision, published_at, audit_id, records`

func (s *DB) scanVersion(r sqldb.Scanner, live int64) (content.Version, error) {
	var v content.Version
	at := s.db.NewTime(false)
	dests := append([]any{&v.AppID, &v.Number, &v.Revision}, at.Dests()...)
	if err := r.Scan(append(dests, &v.AuditID, &v.Records)...); err != nil {
		return v, err
	}
	var err error
	if v.PublishedAt, err = at.Value(); err != nil {
		return v, fmt.Errorf("version %d published_at: %w", v.Number, err)
	}
	v.Live = v.Number == live
	return v, nil
}

// version reads version number of the app; live is the app's live one.
func (s *DB) version(ctx context.Context, q sqldb.Querier, app string, number, live int64) (content.Version, error) {
	v, err := s.scanVersion(q.QueryRowContext(ctx, s.db.Q(`SELECT `+versionColumns+` FROM versions WHERE app_id = ? AND version = ?`), app, number), live)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("version %d of app %q: %w", number, app, content.ErrNotFound)
	}
	return v, err
}

// Versions lists the app's versions, newest first: those numbered below
// before (zero: from the newest), at most limit (zero or more than
// content.MaxVersionsPage: that many).
func (s *DB) Versions(ctx context.Context, app string, before int64, limit int) ([]content.Version, error) {
	if limit <= 0 || limit > content.MaxVersionsPage {
		limit = content.MaxVersionsPage
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	_, live, err := s.Live(ctx, app)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT `+versionColumns+` FROM versions WHERE app_id = ? AND version < ?
		ORDER BY version DESC LIMIT ?`), app, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list the versions of app %q: %w", app, err)
	}
	vs, err := sqldb.Collect(rows, func(r sqldb.Scanner) (content.Version, error) { return s.scanVersion(r, live) })
	if err != nil {
		return nil, fmt.Errorf("list the versions of app %q: %w", app, err)
	}
	return vs, nil
}

// versionRecords is the select of a version's records, as recordColumns
// reads them, from the revisions they name.
func (s *DB) versionRecords() string {
	return `SELECT v.app_id, v.kind, v.id, r.doc, COALESCE(r.location, ''), v.created_at, r.changed_at, v.revision
	FROM version_records v ` + s.revisionOf(false, "v.app_id") + `
	WHERE v.app_id = ? AND v.version = ? AND v.kind = ?`
}

// VersionRecords lists the records of one kind in a version of the app,
// ordered by ID, as ListRecords lists the draft's.
func (s *DB) VersionRecords(ctx context.Context, app string, version int64, kind content.Kind) ([]content.Record, error) {
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(s.versionRecords()+` ORDER BY v.id`), app, version, string(kind))
	if err != nil {
		return nil, fmt.Errorf("list %ss of version %d of app %q: %w", kind, version, app, err)
	}
	recs, err := sqldb.Collect(rows, s.scanRecord)
	if err != nil {
		return nil, fmt.Errorf("list %ss of version %d of app %q: %w", kind, version, app, err)
	}
	return recs, nil
}

// VersionRecord reads one record of a version of the app; ErrNotFound
// when the version does not hold it.
func (s *DB) VersionRecord(ctx context.Context, app string, version int64, kind content.Kind, id string) (content.Record, error) {
	rec, err := s.scanRecord(s.db.SQL().QueryRowContext(ctx, s.db.Q(s.versionRecords()+` AND v.id = ?`), app, version, string(kind), id))
	if errors.Is(err, sql.ErrNoRows) {
		return content.Record{}, fmt.Errorf("%s %q of version %d of app %q: %w", kind, id, version, app, content.ErrNotFound)
	}
	if err != nil {
		return content.Record{}, fmt.Errorf("get %s %q of version %d of app %q: %w", kind, id, version, app, err)
	}
	return rec, nil
}

// DraftDiff lists what publishing the app's draft would change, record by
// record (by kind, then ID) and field by field, at most
// content.MaxDraftChanges records. Of an app that does not publish, it
// lists nothing: its draft is live.
func (s *DB) DraftDiff(ctx context.Context, app string) (content.DraftDiff, error) {
	var out content.DraftDiff
	err := s.db.InSnapshot(ctx, func(q sqldb.Querier) error {
		var live sql.NullInt64
		if err := q.QueryRowContext(ctx, s.db.Q(`SELECT live_version FROM apps WHERE id = ?`), app).Scan(&live); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("app %q: %w", app, content.ErrNotFound)
			}
			return err
		}
		if !live.Valid {
			return nil
		}
		out.Live = live.Int64
		query := `SELECT COALESCE(d.kind, v.kind) AS kind, COALESCE(d.id, v.id) AS id,
				COALESCE(v.revision, 0), COALESCE(d.revision, 0), d.doc, r.doc
			FROM ` + draftAgainstVersion + `
			` + s.revisionOf(true, "?") + `
			WHERE v.revision IS NULL OR d.revision IS NULL OR v.revision <> d.revision
			ORDER BY 1, 2 LIMIT ?`
		if s.db.Engine() == sqldb.SQLite {
			// As in draftCounts: key probes rather than a full join.
			query = `SELECT d.kind, d.id, COALESCE(v.revision, 0), d.revision, d.doc, r.doc
			FROM records d
			LEFT JOIN version_records v ON v.app_id = ?1 AND v.version = ?3 AND v.kind = d.kind AND v.id = d.id
			` + s.revisionOf(true, "?1") + `
			WHERE d.app_id = ?1 AND (v.revision IS NULL OR v.revision <> d.revision)
			UNION ALL
			SELECT v.kind, v.id, v.revision, 0, NULL, r.doc
			FROM version_records v ` + s.revisionOf(false, "?1") + `
			WHERE v.app_id = ?1 AND v.version = ?3 AND NOT EXISTS (SELECT 1 FROM records d WHERE d.app_id = ?1 AND d.kind = v.kind AND d.id = v.id)
			ORDER BY 1, 2 LIMIT ?5`
		}
		rows, err := q.QueryContext(ctx, s.db.Q(query), app, app, live.Int64, app, content.MaxDraftChanges+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		// Read a change at a time, so that large documents end the list
		// (Truncated) before they fill memory.
		size := 0
		for rows.Next() {
			c, err := s.scanDraftChange(rows)
			if err != nil {
				return err
			}
			if len(out.Changes) == content.MaxDraftChanges || size >= content.MaxDraftDiffBytes {
				out.Truncated = true
				break
			}
			out.Changes = append(out.Changes, c)
			for _, f := range c.Fields {
				size += len(f.Before) + len(f.After)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return content.DraftDiff{}, fmt.Errorf("compare the draft of app %q with its live version: %w", app, err)
	}
	return out, nil
}

func (s *DB) scanDraftChange(r sqldb.Scanner) (content.DraftChange, error) {
	var (
		c              content.DraftChange
		kind           string
		draft, liveDoc []byte
		draftJ, liveJ  []byte
		err            error
	)
	if err := r.Scan(&kind, &c.ID, &c.LiveRevision, &c.DraftRevision, &draft, &liveDoc); err != nil {
		return c, err
	}
	c.Kind = content.Kind(kind)
	for _, d := range []struct {
		raw []byte
		out *[]byte
	}{{draft, &draftJ}, {liveDoc, &liveJ}} {
		if d.raw != nil {
			if *d.out, err = s.db.ReadDoc(d.raw); err != nil {
				return c, fmt.Errorf("%s %q doc: %w", kind, c.ID, err)
			}
		}
	}
	switch {
	case c.LiveRevision == 0:
		c.Change = "added"
	case c.DraftRevision == 0:
		c.Change = "removed"
	default:
		c.Change = "changed"
	}
	c.Fields, err = content.Diff(liveJ, draftJ)
	return c, err
}
