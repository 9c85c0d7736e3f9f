package contentdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// importLockKey makes imports take turns on PostgreSQL, as every writer
// does on SQLite: two imports writing the same organizations, new apps or
// channel keys in different orders would otherwise deadlock.
const importLockKey int64 = 0x636d_735f_696d_7074 // "cms_impt"

// Statements of an import name at most this many records or apps, far
// inside both engines' limits on parameters (7 a record).
const (
	recordChunk = 500
	idChunk     = 500
)

// importer applies one bundle inside one transaction.
type importer struct {
	s     *DB
	db    *sqldb.DB
	tx    *sql.Tx
	now   time.Time
	stats content.ImportStats
	// owners maps each app that exists in the transaction to its
	// organization.
	owners map[string]string
	// rev is the revision each app's changes take: an app is moved on as
	// the import reaches it, and given back its revision at the end when
	// nothing of it changed.
	rev map[string]int64
	// audits is each app's audit entry, with what the import wrote of it.
	audits map[string]tenancy.AuditEntry
	// notify holds the apps that changed, themselves or their records.
	notify map[string]bool
	// seen holds the records written, to find one written twice.
	seen     map[recordKey]bool
	done     int
	progress func(int)
	// stmts holds the statements prepared in tx, by text: an import runs
	// the same few statements up to hundreds of thousands of times.
	stmts map[string]*sql.Stmt
	// fullChunk is the statement of recordChunk records.
	fullChunk string
	// outboxMark is the newest webhook message before the import: those
	// after it for apps the import leaves as they were tell of a change
	// that was not made, and go.
	outboxMark int64
}

type recordKey struct {
	app  string
	kind content.Kind
	id   string
}

func (im *importer) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := im.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (im *importer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	st, ok := im.stmts[query]
	if !ok {
		var err error
		if st, err = im.tx.PrepareContext(ctx, im.db.Q(query)); err != nil {
			return nil, err
		}
		im.stmts[query] = st
	}
	return st, nil
}

func (im *importer) tick() {
	im.done++
	if im.progress != nil && (im.done%1000 == 0) {
		im.progress(im.done)
	}
}

// count counts an item written, or found equal, for the import and for
// its app's audit entry (appID empty: an organization).
func (im *importer) count(appID string, created, updated bool) {
	e := im.audits[appID]
	switch {
	case created:
		im.stats.Created++
		e.Created++
	case updated:
		im.stats.Updated++
		e.Updated++
	default:
		im.stats.Unchanged++
		e.Unchanged++
	}
	if appID == "" {
		return // an organization: no app to audit or announce
	}
	im.audits[appID] = e
	if created || updated {
		im.notify[appID] = true
	}
}

// reached notes an app the import writes to: moved is its new revision,
// and its audit entry is written before any change of it.
func (im *importer) reached(ctx context.Context, appID, org string, rev int64) error {
	e := tenancy.AuditEntry{OrganizationID: org, AppID: appID, Operation: "import"}
	id, err := im.s.Audit(ctx, im.tx, e)
	if err != nil {
		return err
	}
	e.ID = id
	im.owners[appID], im.rev[appID], im.audits[appID] = org, rev, e
	return nil
}

// Import implements content.Store.
//
// Lock order on PostgreSQL: imports take turns on an advisory lock, then
// lock every existing app of the bundle in ID order before writing any
// record, as the single-record writes lock their app before the record;
// so an import and concurrent writes wait for each other rather than
// deadlock. A write waiting longer than lock_timeout fails, like a SQLite
// writer after its busy timeout.
func (s *DB) Import(ctx context.Context, b *content.Bundle, progress func(done int)) (content.ImportStats, error) {
	stats, err := s.importing(ctx, "import", progress, func(ctx context.Context, im *importer) error {
		if err := im.lock(ctx, bundleApps(b)); err != nil {
			return err
		}
		return im.write(ctx, b)
	})
	if err != nil {
		return content.ImportStats{}, err
	}
	return stats, nil
}

// importing runs fn with an importer in one transaction, then counts,
// gives back the revisions of apps left unchanged, and announces the
// others. The audit log names the operation after ctx's, or else what.
func (s *DB) importing(ctx context.Context, what string, progress func(done int), fn func(ctx context.Context, im *importer) error) (content.ImportStats, error) {
	ctx = tenancy.WithOperation(ctx, tenancy.OperationOf(ctx, what))
	im := &importer{s: s, db: s.db, owners: map[string]string{}, rev: map[string]int64{}, audits: map[string]tenancy.AuditEntry{},
		notify: map[string]bool{}, seen: map[recordKey]bool{}, progress: progress, stmts: map[string]*sql.Stmt{}}
	err := s.db.InTx(ctx, what, func(tx *sql.Tx) error {
		im.tx = tx
		defer func() {
			for _, st := range im.stmts {
				_ = st.Close()
			}
		}()
		if err := fn(ctx, im); err != nil {
			return err
		}
		return im.finish(ctx)
	})
	if err != nil {
		return content.ImportStats{}, err
	}
	if progress != nil {
		progress(im.done)
	}
	return im.stats, nil
}

// lock makes the importer wait for other imports, then moves on the
// revisions of those of the apps that exist, which locks them.
func (im *importer) lock(ctx context.Context, apps []string) error {
	if err := im.db.Exclusive(ctx, im.tx, importLockKey); err != nil {
		return fmt.Errorf("import: wait for other imports: %w", err)
	}
	if err := im.tx.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM webhook_deliveries`).Scan(&im.outboxMark); err != nil {
		return fmt.Errorf("import: read the webhook outbox: %w", err)
	}
	if err := im.lockApps(ctx, apps); err != nil {
		return err
	}
	// Taken once the import holds its locks, so that no write committed
	// while it waited is later than its changes.
	im.now = im.db.Now()
	return nil
}

// write writes the bundle.
func (im *importer) write(ctx context.Context, b *content.Bundle) error {
	for i, o := range b.Organizations {
		if err := im.organization(ctx, o); err != nil {
			return &content.ItemError{Section: content.SectionOrganizations, Index: i, Err: err}
		}
		im.tick()
	}
	for i, a := range b.Apps {
		if err := im.app(ctx, a); err != nil {
			return &content.ItemError{Section: content.SectionApps, Index: i, Err: err}
		}
		im.tick()
	}
	return im.records(ctx, b.Records)
}

// finish records what the import wrote of each app in its audit entry,
// gives back the revisions of the apps it left as they were, and
// announces the others.
func (im *importer) finish(ctx context.Context) error {
	var unchanged []string
	for _, app := range slices.Sorted(maps.Keys(im.rev)) {
		if !im.notify[app] {
			unchanged = append(unchanged, app)
		}
		e := im.audits[app]
		if err := im.s.Counted(ctx, im.tx, e.ID, e.Created, e.Updated, e.Deleted, e.Unchanged); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	// Nobody saw the revisions of apps the import left as they were.
	for start := 0; start < len(unchanged); start += idChunk {
		ids := unchanged[start:min(start+idChunk, len(unchanged))]
		if _, err := im.tx.ExecContext(ctx, im.db.Q(`UPDATE apps SET revision = revision - 1 WHERE id IN (`+sqldb.Marks(len(ids))+`)`), anys(ids)...); err != nil {
			return fmt.Errorf("import: give back revisions: %w", err)
		}
		// Moving the revision queued content.changed for their webhooks;
		// giving it back made a message queued before tell the revision
		// it told. What the import queued goes: on SQLite every message
		// after the mark, the import being the one writer; on PostgreSQL
		// those its own transaction wrote (a write that committed while
		// the import waited for an app queued one after the mark too).
		mine := ""
		if im.db.Engine() == sqldb.Postgres {
			mine = ` AND created_at = now()`
		}
		if _, err := im.tx.ExecContext(ctx, im.db.Q(`DELETE FROM webhook_deliveries WHERE id > ? AND topic = 'content.changed' AND attempts = 0`+mine+`
			AND app_id IN (`+sqldb.Marks(len(ids))+`)`), append([]any{im.outboxMark}, anys(ids)...)...); err != nil {
			return fmt.Errorf("import: take back webhook messages: %w", err)
		}
	}
	if err := im.db.Notify(ctx, im.tx, slices.Sorted(maps.Keys(im.notify))...); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// bundleApps is every app the bundle names, in ID order.
func bundleApps(b *content.Bundle) []string {
	set := map[string]bool{}
	for _, a := range b.Apps {
		set[a.ID] = true
	}
	for _, r := range b.Records {
		set[r.AppID] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// lockApps moves on the revisions of those of ids (in ID order) that
// exist, which locks them, and writes their audit entries.
func (im *importer) lockApps(ctx context.Context, ids []string) error {
	type locked struct {
		id, org string
		rev     int64
	}
	var apps []locked
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		// Updating only the revision is FOR NO KEY UPDATE: tokens and
		// records referring to the apps may be created meanwhile.
		rows, err := im.tx.QueryContext(ctx, im.db.Q(`UPDATE apps SET revision = revision + 1 WHERE id IN (`+sqldb.Marks(len(chunk))+`)
			RETURNING id, organization_id, revision`), anys(chunk)...)
		if err != nil {
			return fmt.Errorf("import: lock apps: %w", err)
		}
		got, err := sqldb.Collect(rows, func(r sqldb.Scanner) (locked, error) {
			var l locked
			return l, r.Scan(&l.id, &l.org, &l.rev)
		})
		if err != nil {
			return fmt.Errorf("import: lock apps: %w", err)
		}
		apps = append(apps, got...)
	}
	slices.SortFunc(apps, func(a, b locked) int { return strings.Compare(a.id, b.id) })
	for _, a := range apps {
		if err := im.reached(ctx, a.id, a.org, a.rev); err != nil {
			return err
		}
	}
	return nil
}

// upsert runs insert, which must do nothing on a conflict, then update,
// which must change no row when the stored item is equal, unless the
// insert wrote a row.
func (im *importer) upsert(ctx context.Context, insert string, insertArgs []any, update string, updateArgs []any) (created, updated bool, err error) {
	res, err := im.exec(ctx, insert, insertArgs...)
	if err != nil {
		return false, false, err
	}
	if created, err = affected(res); err != nil {
		return false, false, err
	}
	if !created {
		if res, err = im.exec(ctx, update, updateArgs...); err != nil {
			return false, false, err
		}
		if updated, err = affected(res); err != nil {
			return false, false, err
		}
	}
	return created, updated, nil
}

func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n > 0, err
}

func (im *importer) organization(ctx context.Context, o tenancy.Organization) error {
	created, updated, err := im.upsert(ctx,
		`INSERT INTO organizations (id, name, `+im.db.TimeColumns("created_at", true)+`) VALUES (?, ?, `+im.db.TimeMarks(true)+`) ON CONFLICT (id) DO NOTHING`,
		append([]any{o.ID, o.Name}, im.db.TimeArgs(im.now, true)...),
		`UPDATE organizations SET name = ? WHERE id = ? AND name IS DISTINCT FROM ?`, []any{o.Name, o.ID, o.Name})
	if err != nil {
		return fmt.Errorf("write organization %q: %w", o.ID, err)
	}
	im.count("", created, updated)
	if created || updated {
		e := tenancy.AuditEntry{OrganizationID: o.ID, Operation: "import", Subject: "organization/" + o.ID}
		if created {
			e.Created = 1
		} else {
			e.Updated = 1
		}
		if _, err := im.s.Audit(ctx, im.tx, e); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) moved(a tenancy.App, owner string) error {
	return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
		"app %q belongs to organization %q; an app cannot move to another organization", a.ID, owner)}
}

func (im *importer) app(ctx context.Context, a tenancy.App) error {
	if owner, ok := im.owners[a.ID]; ok && owner != a.OrganizationID {
		return im.moved(a, owner)
	}
	doc := sqldb.DocArg(a.Doc)
	t, tm := im.db.TimeColumns, im.db.TimeMarks(true)
	now := im.db.TimeArgs(im.now, true)
	created := false
	if _, ok := im.rev[a.ID]; !ok {
		// Not in the database when the import locked its apps: new, or
		// created by another transaction since.
		if err := im.reached(ctx, a.ID, a.OrganizationID, 1); err != nil {
			return err
		}
		res, err := im.exec(ctx, `INSERT INTO apps (id, organization_id, name, doc, `+t("created_at", true)+`, `+t("updated_at", true)+`, revision) VALUES (?, ?, ?, `+
			im.db.DocMark()+`, `+tm+`, `+tm+`, 1) ON CONFLICT (id) DO NOTHING`,
			slices.Concat([]any{a.ID, a.OrganizationID, a.Name, doc}, now, now)...)
		switch {
		case sqldb.IsForeignKey(err):
			return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
				"organization %q does not exist (neither in the bundle nor in the database)", a.OrganizationID)}
		case err != nil:
			return fmt.Errorf("write app %q: %w", a.ID, err)
		}
		if created, err = affected(res); err != nil {
			return fmt.Errorf("write app %q: %w", a.ID, err)
		}
		if !created {
			var owner string
			var rev int64
			if err := im.tx.QueryRowContext(ctx, im.db.Q(`UPDATE apps SET revision = revision + 1 WHERE id = ? RETURNING organization_id, revision`), a.ID).Scan(&owner, &rev); err != nil {
				return fmt.Errorf("lock app %q: %w", a.ID, err)
			}
			if owner != a.OrganizationID {
				return im.moved(a, owner)
			}
			im.rev[a.ID] = rev
		}
	}
	updated := false
	if !created {
		// On PostgreSQL jsonb compares by value, so a document with its
		// keys in another order is not a change.
		res, err := im.exec(ctx, `UPDATE apps SET name = ?, doc = `+im.db.DocMark()+`, `+im.db.SetTime("updated_at", true)+`
			WHERE id = ? AND (name IS DISTINCT FROM ? OR doc IS DISTINCT FROM `+im.db.DocMark()+`)`,
			slices.Concat([]any{a.Name, doc}, now, []any{a.ID, a.Name, doc})...)
		if err != nil {
			return fmt.Errorf("write app %q: %w", a.ID, err)
		}
		if updated, err = affected(res); err != nil {
			return fmt.Errorf("write app %q: %w", a.ID, err)
		}
	}
	im.count(a.ID, created, updated)
	if !created && !updated {
		return nil
	}
	if _, err := im.exec(ctx, `DELETE FROM channel_keys WHERE app_id = ?`, a.ID); err != nil {
		return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
	}
	for i, ch := range a.Channels {
		if ch.Key == "" {
			continue
		}
		// DO NOTHING rather than a unique violation, which would abort a
		// PostgreSQL transaction before the other app could be named.
		res, err := im.exec(ctx, `INSERT INTO channel_keys (key, app_id, channel_id) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`, ch.Key, a.ID, ch.ID)
		if err != nil {
			return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
		}
		if ok, err := affected(res); err != nil || ok {
			if err != nil {
				return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
			}
			continue
		}
		var other string
		if err := im.tx.QueryRowContext(ctx, im.db.Q(`SELECT app_id FROM channel_keys WHERE key = ?`), ch.Key).Scan(&other); err != nil {
			return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
		}
		return content.Problem{Path: fmt.Sprintf("channels[%d].key", i), Message: fmt.Sprintf(
			"%q is already the key of a channel of app %q", ch.Key, other)}
	}
	return nil
}

// appExists checks, once per app, that a record's app exists. An app
// created by another transaction since the import locked its apps is
// moved on and audited as they were.
func (im *importer) appExists(ctx context.Context, appID string) error {
	if _, ok := im.owners[appID]; ok {
		return nil
	}
	var owner string
	var rev int64
	err := im.tx.QueryRowContext(ctx, im.db.Q(`UPDATE apps SET revision = revision + 1 WHERE id = ? RETURNING organization_id, revision`), appID).Scan(&owner, &rev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return content.Problem{Path: "appId", Message: fmt.Sprintf(
			"app %q does not exist (neither in the bundle nor in the database)", appID)}
	case err != nil:
		return fmt.Errorf("look up app %q: %w", appID, err)
	}
	return im.reached(ctx, appID, owner, rev)
}

// records writes recs, up to recordChunk in one statement. A record
// written before in this import is written on its own, so that each
// statement names a row at most once and counts it right.
func (im *importer) records(ctx context.Context, recs []content.Record) error {
	start := 0
	flush := func(end int) error {
		if start == end {
			return nil
		}
		err := im.recordChunk(ctx, recs, start, end)
		start = end
		return err
	}
	for i, r := range recs {
		if err := im.appExists(ctx, r.AppID); err != nil {
			// Records before it are written first, so that the first
			// record that fails is the one named.
			if ferr := flush(i); ferr != nil {
				return ferr
			}
			return &content.ItemError{Section: content.SectionRecords, Index: i, Err: err}
		}
		k := recordKey{r.AppID, r.Kind, r.ID}
		if im.seen[k] {
			if err := flush(i); err != nil {
				return err
			}
			if err := im.recordAgain(ctx, r); err != nil {
				return &content.ItemError{Section: content.SectionRecords, Index: i, Err: err}
			}
			start = i + 1
			continue
		}
		im.seen[k] = true
		if i+1-start == recordChunk {
			if err := flush(i + 1); err != nil {
				return err
			}
		}
	}
	return flush(len(recs))
}

// recordsUpsert is the statement writing n records: a new one is
// inserted, a stored one updated when its document differs; each row
// written comes back, with whether it was inserted.
func (im *importer) recordsUpsert(n int) string {
	row := `(?, ?, ?, ` + im.db.DocMark() + `, ?, ?, ?, ?)`
	return `INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at, revision) VALUES ` +
		strings.TrimSuffix(strings.Repeat(row+`, `, n), `, `) +
		` ON CONFLICT (app_id, kind, id) DO UPDATE SET doc = excluded.doc, location = excluded.location, updated_at = excluded.updated_at,
		   revision = excluded.revision
		 WHERE records.doc IS DISTINCT FROM excluded.doc
		 RETURNING app_id, created_at = updated_at`
}

// recordChunk writes recs[start:end] in one statement. When it fails on
// SQLite, the records are written again one by one, from a savepoint, to
// name the one that fails. PostgreSQL takes no savepoint (a subtransaction
// a chunk would overflow its cache of them on large imports and slow
// every other transaction meanwhile): what it can refuse of a record the
// content checks refuse first, and a failure names the chunk.
func (im *importer) recordChunk(ctx context.Context, recs []content.Record, start, end int) error {
	if im.db.Engine() != sqldb.SQLite {
		if err := im.upsertRecords(ctx, recs[start:end]); err != nil {
			return &content.ItemError{Section: content.SectionRecords, Index: start,
				Err: fmt.Errorf("write records %d to %d: %w", start, end-1, err)}
		}
		im.ticks(end - start)
		return nil
	}
	if _, err := im.tx.ExecContext(ctx, `SAVEPOINT records`); err != nil {
		return fmt.Errorf("import: write records: %w", err)
	}
	stats, audits, notify := im.stats, maps.Clone(im.audits), maps.Clone(im.notify)
	if err := im.upsertRecords(ctx, recs[start:end]); err == nil {
		if _, err := im.tx.ExecContext(ctx, `RELEASE SAVEPOINT records`); err != nil {
			return fmt.Errorf("import: write records: %w", err)
		}
		im.ticks(end - start)
		return nil
	}
	// What the statement counted before it failed is undone with it.
	im.stats, im.audits, im.notify = stats, audits, notify
	if _, err := im.tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT records`); err != nil {
		return fmt.Errorf("import: write records: %w", err)
	}
	for i := start; i < end; i++ {
		if err := im.upsertRecords(ctx, recs[i:i+1]); err != nil {
			return &content.ItemError{Section: content.SectionRecords, Index: i, Err: fmt.Errorf("write %s %q: %w", recs[i].Kind, recs[i].ID, err)}
		}
		im.tick()
	}
	if _, err := im.tx.ExecContext(ctx, `RELEASE SAVEPOINT records`); err != nil {
		return fmt.Errorf("import: write records: %w", err)
	}
	return nil
}

func (im *importer) ticks(n int) {
	for range n {
		im.tick()
	}
}

// upsertRecords writes recs, none written before in this import, and
// counts them.
func (im *importer) upsertRecords(ctx context.Context, recs []content.Record) error {
	now := im.db.TimeArgs(im.now, false)[0]
	args := make([]any, 0, 8*len(recs))
	sent := map[string]int{}
	for _, r := range recs {
		args = append(args, r.AppID, string(r.Kind), r.ID, sqldb.DocArg(r.Doc), sqldb.NullString(r.Location), now, now, im.rev[r.AppID])
		sent[r.AppID]++
	}
	var rows *sql.Rows
	if len(recs) == recordChunk {
		if im.fullChunk == "" {
			im.fullChunk = im.recordsUpsert(recordChunk)
		}
		st, err := im.stmt(ctx, im.fullChunk)
		if err != nil {
			return err
		}
		if rows, err = st.QueryContext(ctx, args...); err != nil {
			return err
		}
	} else {
		var err error
		if rows, err = im.tx.QueryContext(ctx, im.db.Q(im.recordsUpsert(len(recs))), args...); err != nil {
			return err
		}
	}
	err := func() error {
		defer rows.Close()
		for rows.Next() {
			var app string
			var created bool
			if err := rows.Scan(&app, &created); err != nil {
				return err
			}
			im.count(app, created, !created)
			sent[app]--
		}
		return rows.Err()
	}()
	if err != nil {
		return err
	}
	for app, n := range sent {
		for range n {
			im.count(app, false, false)
		}
	}
	return nil
}

// recordAgain writes a record written before in this import.
func (im *importer) recordAgain(ctx context.Context, r content.Record) error {
	doc, loc, now, rev := sqldb.DocArg(r.Doc), sqldb.NullString(r.Location), im.db.TimeArgs(im.now, false)[0], im.rev[r.AppID]
	// Its first write in this import made it exist; what is written now
	// counts only if it differs.
	var differs int
	if err := im.tx.QueryRowContext(ctx, im.db.Q(`SELECT count(*) FROM records WHERE app_id = ? AND kind = ? AND id = ? AND doc IS DISTINCT FROM `+im.db.DocMark()),
		r.AppID, string(r.Kind), r.ID, doc).Scan(&differs); err != nil {
		return fmt.Errorf("write %s %q: %w", r.Kind, r.ID, err)
	}
	if differs == 0 {
		im.count(r.AppID, false, false)
		im.tick()
		return nil
	}
	// A revision the first write made is this import's: taken back, as
	// the state at commit is what is kept, and written again with it.
	if _, err := im.exec(ctx, `DELETE FROM revisions WHERE app_id = ? AND kind = ? AND id = ? AND revision = ?`, r.AppID, string(r.Kind), r.ID, rev); err != nil {
		return fmt.Errorf("write %s %q: %w", r.Kind, r.ID, err)
	}
	if _, err := im.exec(ctx, `UPDATE records SET doc = `+im.db.DocMark()+`, location = ?, updated_at = ?, revision = ? WHERE app_id = ? AND kind = ? AND id = ?`,
		doc, loc, now, rev, r.AppID, string(r.Kind), r.ID); err != nil {
		return fmt.Errorf("write %s %q: %w", r.Kind, r.ID, err)
	}
	im.count(r.AppID, false, true)
	im.tick()
	return nil
}
