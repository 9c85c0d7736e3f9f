package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const recordColumns = `app_id, kind, id, doc, COALESCE(location, ''), created_at, updated_at`

func scanRecord(r scanner) (content.Record, error) {
	var (
		rec              content.Record
		kind, doc        string
		created, updated string
	)
	if err := r.Scan(&rec.AppID, &kind, &rec.ID, &doc, &rec.Location, &created, &updated); err != nil {
		return content.Record{}, err
	}
	rec.Kind, rec.Doc = content.Kind(kind), []byte(doc)
	var err error
	if rec.CreatedAt, err = parseTime(created); err != nil {
		return content.Record{}, fmt.Errorf("%s %q created_at: %w", kind, rec.ID, err)
	}
	if rec.UpdatedAt, err = parseTime(updated); err != nil {
		return content.Record{}, fmt.Errorf("%s %q updated_at: %w", kind, rec.ID, err)
	}
	return rec, nil
}

// Record implements content.Store.
func (s *Store) Record(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error) {
	rec, err := scanRecord(s.recordStmt.QueryRowContext(ctx, appID, string(kind), id))
	if errors.Is(err, sql.ErrNoRows) {
		return content.Record{}, fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
	}
	if err != nil {
		return content.Record{}, fmt.Errorf("get %s %q of app %q: %w", kind, id, appID, err)
	}
	return rec, nil
}

// ListRecords implements content.Store.
func (s *Store) ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+recordColumns+` FROM records WHERE app_id = ? AND kind = ? ORDER BY id`, appID, string(kind))
	if err != nil {
		return nil, fmt.Errorf("list %ss of app %q: %w", kind, appID, err)
	}
	recs, err := collect(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("list %ss of app %q: %w", kind, appID, err)
	}
	return recs, nil
}

// Revision implements content.Store.
func (s *Store) Revision(ctx context.Context, appID string) (int64, error) {
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

// importer applies one bundle inside one transaction.
type importer struct {
	tx       *sql.Tx
	now      string
	stats    content.ImportStats
	changed  map[string]bool // apps whose records changed
	appKnown map[string]bool
	done     int
	progress func(int)
	// stmts holds the statements prepared in tx, by text: an import runs
	// the same few statements up to hundreds of thousands of times.
	stmts map[string]*sql.Stmt
}

func (im *importer) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, ok := im.stmts[query]
	if !ok {
		var err error
		if st, err = im.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		im.stmts[query] = st
	}
	return st.ExecContext(ctx, args...)
}

func (im *importer) tick() {
	im.done++
	if im.progress != nil && (im.done%1000 == 0) {
		im.progress(im.done)
	}
}

// Import implements content.Store.
func (s *Store) Import(ctx context.Context, b *content.Bundle, progress func(done int)) (stats content.ImportStats, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return stats, fmt.Errorf("import: begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	im := &importer{tx: tx, now: formatTime(time.Now()), changed: map[string]bool{}, appKnown: map[string]bool{}, progress: progress, stmts: map[string]*sql.Stmt{}}
	defer func() {
		for _, st := range im.stmts {
			_ = st.Close()
		}
	}()
	for i, o := range b.Organizations {
		if err := im.organization(ctx, o); err != nil {
			return stats, &content.ItemError{Section: content.SectionOrganizations, Index: i, Err: err}
		}
		im.tick()
	}
	for i, a := range b.Apps {
		if err := im.app(ctx, a); err != nil {
			return stats, &content.ItemError{Section: content.SectionApps, Index: i, Err: err}
		}
		im.tick()
	}
	for i, r := range b.Records {
		if err := im.record(ctx, r); err != nil {
			return stats, &content.ItemError{Section: content.SectionRecords, Index: i, Err: err}
		}
		im.tick()
	}
	for id := range im.changed {
		if _, err := tx.ExecContext(ctx, `UPDATE apps SET revision = revision + 1 WHERE id = ?`, id); err != nil {
			return stats, fmt.Errorf("import: bump revision of app %q: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return stats, fmt.Errorf("import: commit: %w", err)
	}
	if progress != nil {
		progress(im.done)
	}
	return im.stats, nil
}

// upsert inserts with insert, or else runs update, which must change no
// row when the stored item is equal; it counts the outcome.
func (im *importer) upsert(ctx context.Context, insert string, insertArgs []any, update string, updateArgs []any) (changed bool, err error) {
	res, err := im.exec(ctx, insert, insertArgs...)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		im.stats.Created++
		return true, nil
	}
	res, err = im.exec(ctx, update, updateArgs...)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		im.stats.Updated++
		return true, nil
	}
	im.stats.Unchanged++
	return false, nil
}

func (im *importer) organization(ctx context.Context, o tenancy.Organization) error {
	_, err := im.upsert(ctx,
		`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`, []any{o.ID, o.Name, im.now},
		`UPDATE organizations SET name = ? WHERE id = ? AND name IS NOT ?`, []any{o.Name, o.ID, o.Name})
	if err != nil {
		return fmt.Errorf("write organization %q: %w", o.ID, err)
	}
	return nil
}

func (im *importer) app(ctx context.Context, a tenancy.App) error {
	var owner string
	err := im.tx.QueryRowContext(ctx, `SELECT organization_id FROM apps WHERE id = ?`, a.ID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("look up app %q: %w", a.ID, err)
	case owner != a.OrganizationID:
		return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
			"app %q belongs to organization %q; an app cannot move to another organization", a.ID, owner)}
	}
	doc := string(a.Doc)
	changed, err := im.upsert(ctx,
		`INSERT INTO apps (id, organization_id, name, doc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		[]any{a.ID, a.OrganizationID, a.Name, doc, im.now, im.now},
		`UPDATE apps SET name = ?, doc = ?, updated_at = ?, revision = revision + 1 WHERE id = ? AND (name IS NOT ? OR doc IS NOT ?)`,
		[]any{a.Name, doc, im.now, a.ID, a.Name, doc})
	switch {
	case isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY):
		return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
			"organization %q does not exist (neither in the bundle nor in the database)", a.OrganizationID)}
	case err != nil:
		return fmt.Errorf("write app %q: %w", a.ID, err)
	}
	im.appKnown[a.ID] = true
	if !changed {
		return nil
	}
	if _, err := im.tx.ExecContext(ctx, `DELETE FROM channel_keys WHERE app_id = ?`, a.ID); err != nil {
		return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
	}
	for i, ch := range a.Channels {
		if ch.Key == "" {
			continue
		}
		_, err := im.tx.ExecContext(ctx, `INSERT INTO channel_keys (key, app_id, channel_id) VALUES (?, ?, ?)`, ch.Key, a.ID, ch.ID)
		if isDuplicate(err) {
			var other string
			_ = im.tx.QueryRowContext(ctx, `SELECT app_id FROM channel_keys WHERE key = ?`, ch.Key).Scan(&other)
			return content.Problem{Path: fmt.Sprintf("channels[%d].key", i), Message: fmt.Sprintf(
				"%q is already the key of a channel of app %q", ch.Key, other)}
		}
		if err != nil {
			return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
		}
	}
	return nil
}

func (im *importer) record(ctx context.Context, r content.Record) error {
	if !im.appKnown[r.AppID] {
		var n int
		if err := im.tx.QueryRowContext(ctx, `SELECT count(*) FROM apps WHERE id = ?`, r.AppID).Scan(&n); err != nil {
			return fmt.Errorf("look up app %q: %w", r.AppID, err)
		}
		if n == 0 {
			return content.Problem{Path: "appId", Message: fmt.Sprintf(
				"app %q does not exist (neither in the bundle nor in the database)", r.AppID)}
		}
		im.appKnown[r.AppID] = true
	}
	doc, loc := string(r.Doc), nullString(r.Location)
	changed, err := im.upsert(ctx,
		`INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (app_id, kind, id) DO NOTHING`,
		[]any{r.AppID, string(r.Kind), r.ID, doc, loc, im.now, im.now},
		`UPDATE records SET doc = ?, location = ?, updated_at = ? WHERE app_id = ? AND kind = ? AND id = ? AND doc IS NOT ?`,
		[]any{doc, loc, im.now, r.AppID, string(r.Kind), r.ID, doc})
	if err != nil {
		return fmt.Errorf("write %s %q: %w", r.Kind, r.ID, err)
	}
	if changed {
		im.changed[r.AppID] = true
	}
	return nil
}

// Export implements content.Store.
func (s *Store) Export(ctx context.Context, f content.ExportFilter) (*content.Bundle, error) {
	var b content.Bundle
	var where []string
	var args []any
	if f.OrganizationID != "" {
		where, args = append(where, `organization_id = ?`), append(args, f.OrganizationID)
	}
	if f.AppID != "" {
		where, args = append(where, `id = ?`), append(args, f.AppID)
	}
	q := `SELECT ` + appColumns + ` FROM apps`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("export apps: %w", err)
	}
	if b.Apps, err = collect(rows, scanApp); err != nil {
		return nil, fmt.Errorf("export apps: %w", err)
	}
	orgs := map[string]bool{}
	for _, a := range b.Apps {
		if !orgs[a.OrganizationID] {
			orgs[a.OrganizationID] = true
			o, err := s.Organization(ctx, a.OrganizationID)
			if err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
			b.Organizations = append(b.Organizations, o)
		}
	}
	if f.AppID == "" && f.OrganizationID != "" && len(b.Organizations) == 0 {
		// An organization without apps is still exported.
		o, err := s.Organization(ctx, f.OrganizationID)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		b.Organizations = append(b.Organizations, o)
	}
	if f.AppID == "" && f.OrganizationID == "" {
		if b.Organizations, err = s.ListOrganizations(ctx); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	for _, a := range b.Apps {
		for _, k := range content.Kinds() {
			recs, err := s.ListRecords(ctx, a.ID, k)
			if err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
			b.Records = append(b.Records, recs...)
		}
	}
	return &b, nil
}

// write runs fn in a transaction and moves the app's revision with it.
func (s *Store) write(ctx context.Context, appID, what string, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE apps SET revision = revision + 1 WHERE id = ?`, appID); err != nil {
		return fmt.Errorf("%s: move revision: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// CreateRecord implements content.Store.
func (s *Store) CreateRecord(ctx context.Context, r content.Record) (content.Record, error) {
	now := time.Now().UTC()
	r.CreatedAt, r.UpdatedAt = now, now
	err := s.write(ctx, r.AppID, fmt.Sprintf("create %s %q", r.Kind, r.ID), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.AppID, string(r.Kind), r.ID, string(r.Doc), nullString(r.Location), formatTime(now), formatTime(now))
		switch {
		case isDuplicate(err):
			return fmt.Errorf("%s %q of app %q: %w", r.Kind, r.ID, r.AppID, content.ErrConflict)
		case isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY):
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

// UpdateRecord implements content.Store.
func (s *Store) UpdateRecord(ctx context.Context, appID string, kind content.Kind, id string, change func(content.Record) (content.Record, error)) (content.Record, error) {
	var out content.Record
	err := s.write(ctx, appID, fmt.Sprintf("update %s %q", kind, id), func(tx *sql.Tx) error {
		cur, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM records WHERE app_id = ? AND kind = ? AND id = ?`, appID, string(kind), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read %s %q: %w", kind, id, err)
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.Kind, next.AppID, next.ID, next.CreatedAt = kind, appID, id, cur.CreatedAt
		next.UpdatedAt = time.Now().UTC()
		if _, err := tx.ExecContext(ctx, `UPDATE records SET doc = ?, location = ?, updated_at = ? WHERE app_id = ? AND kind = ? AND id = ?`,
			string(next.Doc), nullString(next.Location), formatTime(next.UpdatedAt), appID, string(kind), id); err != nil {
			return fmt.Errorf("update %s %q: %w", kind, id, err)
		}
		out = next
		return nil
	})
	return out, err
}

// DeleteRecord implements content.Store.
func (s *Store) DeleteRecord(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error) {
	var out content.Record
	err := s.write(ctx, appID, fmt.Sprintf("delete %s %q", kind, id), func(tx *sql.Tx) error {
		cur, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM records WHERE app_id = ? AND kind = ? AND id = ?`, appID, string(kind), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read %s %q: %w", kind, id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE app_id = ? AND kind = ? AND id = ?`, appID, string(kind), id); err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, id, err)
		}
		out = cur
		return nil
	})
	return out, err
}

// AppByChannelKey implements content.Store.
func (s *Store) AppByChannelKey(ctx context.Context, key string) (tenancy.App, string, error) {
	var appID, channelID string
	err := s.db.QueryRowContext(ctx, `SELECT app_id, channel_id FROM channel_keys WHERE key = ?`, key).Scan(&appID, &channelID)
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.App{}, "", fmt.Errorf("channel key %q: %w", key, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, "", fmt.Errorf("look up channel key %q: %w", key, err)
	}
	app, err := s.App(ctx, appID)
	return app, channelID, err
}
