package contentdb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// RestoreRecord implements content.Store.
func (s *DB) RestoreRecord(ctx context.Context, appID string, kind content.Kind, id string, revision, ifRevision int64) (content.Revision, error) {
	if kind == content.KindApp {
		return content.Revision{}, content.Problem{Path: "kind", Message: "an app's own fields come back with the app (restore the app to a time)"}
	}
	ctx = tenancy.WithOperation(ctx, tenancy.OperationOf(ctx, "restoreRecord"))
	var out content.Revision
	// The counts are known once the record is read.
	err := s.write(ctx, appID, kind, id, fmt.Sprintf("restore %s %q", kind, id), tenancy.AuditEntry{Operation: "restoreRecord"}, func(tx *sql.Tx, m tenancydb.Moved) error {
		target, err := s.scanRevision(tx.QueryRowContext(ctx, s.db.Q(`SELECT app_id, kind, id, revision, deleted, doc, COALESCE(location, ''), changed_at, audit_id
			FROM revisions WHERE app_id = ? AND kind = ? AND id = ? AND revision = ?`), appID, string(kind), id, revision))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("revision %d of %s %q of app %q: %w", revision, kind, id, appID, content.ErrNotFound)
		case err != nil:
			return fmt.Errorf("read revision %d of %s %q: %w", revision, kind, id, err)
		}
		cur, err := s.record(s.lockStmt.QueryRowIn(ctx, tx, appID, string(kind), id), appID, kind, id)
		exists := err == nil
		if err != nil && !errors.Is(err, content.ErrNotFound) {
			return err
		}
		if !exists {
			// A deleted record is at its deletion's revision.
			cur = content.Record{AppID: appID, Kind: kind, ID: id}
			if err := tx.QueryRowContext(ctx, s.db.Q(`SELECT COALESCE(max(revision), 0) FROM revisions WHERE app_id = ? AND kind = ? AND id = ?`),
				appID, string(kind), id).Scan(&cur.Revision); err != nil {
				return fmt.Errorf("read revisions of %s %q: %w", kind, id, err)
			}
		}
		if ifRevision != 0 && cur.Revision != ifRevision {
			return &content.Stale{Kind: kind, ID: id, Current: cur.Revision, Read: ifRevision}
		}
		var e tenancy.AuditEntry
		out = target
		switch {
		case target.Deleted && !exists, !target.Deleted && exists && bytes.Equal(cur.Doc, target.Doc) && cur.Location == target.Location:
			e.Unchanged = 1
			out.Revision, out.ChangedAt = cur.Revision, cur.UpdatedAt
		case target.Deleted:
			e.Deleted = 1
		case exists:
			e.Updated = 1
		default:
			e.Created = 1
		}
		if err := s.Counted(ctx, tx, m.Audit, e.Created, e.Updated, e.Deleted, e.Unchanged); err != nil {
			return err
		}
		if e.Unchanged == 1 {
			return nil
		}
		out.Revision, out.ChangedAt = m.Revision, s.db.Now()
		at := s.db.TimeArgs(out.ChangedAt, false)[0]
		switch {
		case target.Deleted:
			_, err = tx.ExecContext(ctx, s.db.Q(`DELETE FROM records WHERE app_id = ? AND kind = ? AND id = ?`), appID, string(kind), id)
		case exists:
			_, err = s.updateStmt.ExecIn(ctx, tx, sqldb.DocArg(target.Doc), sqldb.NullString(target.Location), at, m.Revision, appID, string(kind), id)
		default:
			_, err = s.insertStmt.ExecIn(ctx, tx, appID, string(kind), id, sqldb.DocArg(target.Doc), sqldb.NullString(target.Location), at, at, m.Revision)
		}
		if err != nil {
			return fmt.Errorf("restore %s %q: %w", kind, id, err)
		}
		return nil
	})
	return out, err
}

// RestoreApp implements content.Store. It runs as an import does: the
// app's state at the time is written over what it holds now, records
// created since are deleted, and what is equal is left alone.
func (s *DB) RestoreApp(ctx context.Context, appID string, at time.Time, appFields bool) (content.ImportStats, error) {
	return s.importing(ctx, "restoreApp", nil, func(ctx context.Context, im *importer) error {
		if err := im.lock(ctx, []string{appID}); err != nil {
			return err
		}
		if _, ok := im.rev[appID]; !ok {
			return fmt.Errorf("app %q: %w", appID, content.ErrNotFound)
		}
		b, gone, err := im.stateAt(ctx, appID, at)
		if err != nil {
			return err
		}
		if !appFields {
			b.Apps = nil
		}
		if err := im.write(ctx, b); err != nil {
			return err
		}
		return im.remove(ctx, appID, gone)
	})
}

// stateAt reads what the app held at time at: its name and fields, and
// its records then, as a bundle; gone is its records that did not exist
// then.
func (im *importer) stateAt(ctx context.Context, appID string, at time.Time) (b *content.Bundle, gone []recordKey, err error) {
	// History older than what retention pruned is incomplete.
	pruned := im.db.NewTime(false)
	if err := im.tx.QueryRowContext(ctx, im.db.Q(`SELECT history_pruned_before FROM apps WHERE id = ?`), appID).Scan(pruned.Dests()...); err != nil {
		return nil, nil, fmt.Errorf("read app %q: %w", appID, err)
	}
	if cut, err := pruned.Value(); err == nil && !cut.IsZero() && at.Before(cut) {
		return nil, nil, content.Problem{Path: "at", Message: fmt.Sprintf(
			"the history of app %q before %s has been pruned (CONTENT_HISTORY_RETENTION): restore it to a later time", appID, cut.UTC().Format(time.RFC3339))}
	}
	// The app's revision at the time is a state it had as a whole; each
	// key's newest revision up to it is what it held then. An app's own
	// revision has its name among its fields, taken out here.
	var upTo int64
	if err := im.tx.QueryRowContext(ctx, im.db.Q(`SELECT COALESCE(max(revision), -1) FROM revisions WHERE app_id = ? AND changed_at <= ?`),
		appID, im.db.TimeArgs(at, false)[0]).Scan(&upTo); err != nil {
		return nil, nil, fmt.Errorf("read app %q as it was: %w", appID, err)
	}
	doc, name := `CASE WHEN kind = 'app' THEN json_remove(doc, '$.name') ELSE doc END`, `json_extract(doc, '$.name')`
	if im.db.Engine() == sqldb.Postgres {
		doc, name = `CASE WHEN kind = 'app' THEN doc - 'name' ELSE doc END`, `doc ->> 'name'`
	}
	rows, err := im.tx.QueryContext(ctx, im.db.Q(`SELECT kind, id, deleted, `+doc+`, COALESCE(location, ''), COALESCE(`+name+`, '') FROM (
			SELECT kind, id, deleted, doc, location, row_number() OVER (PARTITION BY kind, id ORDER BY revision DESC) AS n
			FROM revisions WHERE app_id = ? AND revision <= ?) AS ranked
		WHERE n = 1 ORDER BY kind, id`), appID, upTo)
	if err != nil {
		return nil, nil, fmt.Errorf("read app %q as it was: %w", appID, err)
	}
	b = &content.Bundle{}
	alive := map[recordKey]bool{}
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			var (
				kind, id, location, appName string
				deleted                     bool
				raw                         []byte
			)
			if err := rows.Scan(&kind, &id, &deleted, &raw, &location, &appName); err != nil {
				return err
			}
			d, err := im.db.ReadDoc(raw)
			if err != nil {
				return fmt.Errorf("%s %q: %w", kind, id, err)
			}
			if content.Kind(kind) == content.KindApp {
				b.Apps = append(b.Apps, tenancy.App{ID: appID, OrganizationID: im.owners[appID], Name: appName, Doc: d, Channels: tenancy.ChannelsOf(d)})
				continue
			}
			if deleted {
				continue
			}
			alive[recordKey{appID, content.Kind(kind), id}] = true
			b.Records = append(b.Records, content.Record{AppID: appID, Kind: content.Kind(kind), ID: id, Doc: d, Location: location})
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, nil, fmt.Errorf("read app %q as it was: %w", appID, err)
	}
	if len(b.Apps) == 0 {
		return nil, nil, content.Problem{Path: "at", Message: fmt.Sprintf("app %q has no state at %s: it was created later", appID, at.UTC().Format(time.RFC3339))}
	}
	rows, err = im.tx.QueryContext(ctx, im.db.Q(`SELECT kind, id FROM records WHERE app_id = ? ORDER BY kind, id`), appID)
	if err != nil {
		return nil, nil, fmt.Errorf("read the records of app %q: %w", appID, err)
	}
	keys, err := sqldb.Collect(rows, func(r sqldb.Scanner) (recordKey, error) {
		k := recordKey{app: appID}
		var kind string
		err := r.Scan(&kind, &k.id)
		k.kind = content.Kind(kind)
		return k, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the records of app %q: %w", appID, err)
	}
	for _, k := range keys {
		if !alive[k] {
			gone = append(gone, k)
		}
	}
	return b, gone, nil
}

// remove deletes records of the app, each keeping its last state as a
// revision.
func (im *importer) remove(ctx context.Context, appID string, keys []recordKey) error {
	for start := 0; start < len(keys); start += idChunk {
		chunk := keys[start:min(start+idChunk, len(keys))]
		args := make([]any, 0, 1+2*len(chunk))
		args = append(args, appID)
		for _, k := range chunk {
			args = append(args, string(k.kind), k.id)
		}
		res, err := im.tx.ExecContext(ctx, im.db.Q(`DELETE FROM records WHERE app_id = ? AND (kind, id) IN (VALUES `+
			strings.TrimSuffix(strings.Repeat(`(?, ?), `, len(chunk)), `, `)+`)`), args...)
		if err != nil {
			return fmt.Errorf("delete records of app %q: %w", appID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete records of app %q: %w", appID, err)
		}
		e := im.audits[appID]
		e.Deleted += int(n)
		im.audits[appID] = e
		im.stats.Deleted += int(n)
		if n > 0 {
			im.notify[appID] = true
		}
	}
	return nil
}
