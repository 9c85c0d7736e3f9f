package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const recordColumns = `app_id, kind, id, doc, COALESCE(location, ''), created_at, updated_at`

func scanRecord(r pgx.Row) (content.Record, error) {
	var (
		rec              content.Record
		kind             string
		doc              []byte
		created, updated time.Time
	)
	if err := r.Scan(&rec.AppID, &kind, &rec.ID, &doc, &rec.Location, &created, &updated); err != nil {
		return content.Record{}, err
	}
	rec.Kind = content.Kind(kind)
	var err error
	if rec.Doc, err = canonicalDoc(doc); err != nil {
		return content.Record{}, fmt.Errorf("%s %q doc: %w", kind, rec.ID, err)
	}
	rec.CreatedAt, rec.UpdatedAt = created.UTC(), updated.UTC()
	return rec, nil
}

// Record implements content.Store.
func (s *Store) Record(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error) {
	rec, err := record(ctx, s.pool, appID, kind, id, "")
	if err != nil {
		return content.Record{}, err
	}
	return rec, nil
}

// record reads one record; lock is empty or a locking clause.
func record(ctx context.Context, q querier, appID string, kind content.Kind, id, lock string) (content.Record, error) {
	rec, err := scanRecord(q.QueryRow(ctx, `SELECT `+recordColumns+` FROM records WHERE app_id = $1 AND kind = $2 AND id = $3`+lock,
		appID, string(kind), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return content.Record{}, fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
	}
	if err != nil {
		return content.Record{}, fmt.Errorf("get %s %q of app %q: %w", kind, id, appID, err)
	}
	return rec, nil
}

// ListRecords implements content.Store.
func (s *Store) ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error) {
	return listRecords(ctx, s.pool, appID, kind)
}

func listRecords(ctx context.Context, q querier, appID string, kind content.Kind) ([]content.Record, error) {
	recs, err := query(ctx, q, scanRecord, `SELECT `+recordColumns+` FROM records WHERE app_id = $1 AND kind = $2 ORDER BY id`, appID, string(kind))
	if err != nil {
		return nil, fmt.Errorf("list %ss of app %q: %w", kind, appID, err)
	}
	return recs, nil
}

// Revision implements content.Store.
func (s *Store) Revision(ctx context.Context, appID string) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, `SELECT revision FROM apps WHERE id = $1`, appID).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("app %q: %w", appID, content.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read revision of app %q: %w", appID, err)
	}
	return rev, nil
}

// importLockKey is the pg_advisory_xact_lock key that makes imports take
// turns, as every writer does with SQLite. Two imports writing the same
// organizations, new apps or channel keys in different orders would
// otherwise deadlock.
const importLockKey int64 = 0x636d_735f_696d_7074 // "cms_impt"

// recordBatch is how many records an import sends in one round trip.
const recordBatch = 500

// importer applies one bundle inside one transaction.
type importer struct {
	tx    pgx.Tx
	now   time.Time
	stats content.ImportStats
	// owners maps each app that exists in the transaction to its
	// organization.
	owners map[string]string
	// changed holds apps whose records changed: their revisions move at
	// the end. notify also holds apps created or changed themselves.
	changed, notify map[string]bool
	done            int
	progress        func(int)
}

func (im *importer) tick() {
	im.done++
	if im.progress != nil && (im.done%1000 == 0) {
		im.progress(im.done)
	}
}

// Import implements content.Store.
//
// Lock order: imports take turns on an advisory lock, then lock every
// existing app of the bundle in ID order before writing any record, as the
// single-record writes lock their app before the record; so an import and
// concurrent writes wait for each other rather than deadlock. A write
// waiting longer than lock_timeout fails, like a SQLite writer after its
// busy timeout.
func (s *Store) Import(ctx context.Context, b *content.Bundle, progress func(done int)) (stats content.ImportStats, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return stats, fmt.Errorf("import: begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreClosed(tx.Rollback(context.WithoutCancel(ctx))))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, importLockKey); err != nil {
		return stats, fmt.Errorf("import: wait for other imports: %w", err)
	}
	im := &importer{tx: tx, now: now(), owners: map[string]string{}, changed: map[string]bool{}, notify: map[string]bool{}, progress: progress}
	if err := im.lockApps(ctx, b); err != nil {
		return stats, err
	}
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
	for start := 0; start < len(b.Records); start += recordBatch {
		if err := im.records(ctx, b.Records, start, min(start+recordBatch, len(b.Records))); err != nil {
			return stats, err
		}
	}
	if len(im.changed) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE apps SET revision = revision + 1 WHERE id = ANY($1)`, sortedKeys(im.changed)); err != nil {
			return stats, fmt.Errorf("import: move revisions: %w", err)
		}
	}
	if len(im.notify) > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, id) FROM unnest($2::text[]) AS id`, revisionChannel, sortedKeys(im.notify)); err != nil {
			return stats, fmt.Errorf("import: notify: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return stats, fmt.Errorf("import: commit: %w", err)
	}
	if progress != nil {
		progress(im.done)
	}
	return im.stats, nil
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// lockApps locks the bundle's existing apps in ID order and notes their
// organizations.
func (im *importer) lockApps(ctx context.Context, b *content.Bundle) error {
	ids := map[string]bool{}
	for _, a := range b.Apps {
		ids[a.ID] = true
	}
	for _, r := range b.Records {
		ids[r.AppID] = true
	}
	if len(ids) == 0 {
		return nil
	}
	// FOR NO KEY UPDATE is what updating an app takes anyway, and lets
	// tokens and records referring to it be created meanwhile.
	rows, err := im.tx.Query(ctx, `SELECT id, organization_id FROM apps WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, sortedKeys(ids))
	if err != nil {
		return fmt.Errorf("import: lock apps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, org string
		if err := rows.Scan(&id, &org); err != nil {
			return fmt.Errorf("import: lock apps: %w", err)
		}
		im.owners[id] = org
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("import: lock apps: %w", err)
	}
	return nil
}

// upsert runs insert, which must do nothing on a conflict, and update,
// which must change no row when the stored item is equal, in one round
// trip, and counts the outcome. After an insert the update finds the row
// equal and changes nothing.
func (im *importer) upsert(ctx context.Context, insert string, insertArgs []any, update string, updateArgs []any) (changed bool, err error) {
	batch := &pgx.Batch{}
	batch.Queue(insert, insertArgs...)
	batch.Queue(update, updateArgs...)
	br := im.tx.SendBatch(ctx, batch)
	created, updated, err := pairResult(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	im.count(created, updated)
	return created || updated, nil
}

// pairResult reads the results of an insert and update queued by upsert
// or records.
func pairResult(br pgx.BatchResults) (created, updated bool, err error) {
	ins, err := br.Exec()
	if err != nil {
		return false, false, err
	}
	upd, err := br.Exec()
	if err != nil {
		return false, false, err
	}
	return ins.RowsAffected() > 0, upd.RowsAffected() > 0, nil
}

func (im *importer) count(created, updated bool) {
	switch {
	case created:
		im.stats.Created++
	case updated:
		im.stats.Updated++
	default:
		im.stats.Unchanged++
	}
}

func (im *importer) organization(ctx context.Context, o tenancy.Organization) error {
	_, err := im.upsert(ctx,
		`INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, []any{o.ID, o.Name, im.now},
		`UPDATE organizations SET name = $2 WHERE id = $1 AND name IS DISTINCT FROM $2`, []any{o.ID, o.Name})
	if err != nil {
		return fmt.Errorf("write organization %q: %w", o.ID, err)
	}
	return nil
}

func (im *importer) app(ctx context.Context, a tenancy.App) error {
	if owner, ok := im.owners[a.ID]; ok && owner != a.OrganizationID {
		return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
			"app %q belongs to organization %q; an app cannot move to another organization", a.ID, owner)}
	}
	doc := docText(a.Doc)
	// jsonb compares by value, so a document with its keys in another
	// order is not a change.
	changed, err := im.upsert(ctx,
		`INSERT INTO apps (id, organization_id, name, doc, created_at, updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $5)
		 ON CONFLICT (id) DO NOTHING`,
		[]any{a.ID, a.OrganizationID, a.Name, doc, im.now},
		`UPDATE apps SET name = $2, doc = $3::jsonb, updated_at = $4, updated_at_ns = 0, revision = revision + 1
		 WHERE id = $1 AND organization_id = $5 AND (name IS DISTINCT FROM $2 OR doc IS DISTINCT FROM $3::jsonb)`,
		[]any{a.ID, a.Name, doc, im.now, a.OrganizationID})
	switch {
	case err == nil:
	case pgErrorCode(err) == foreignKeyViolation:
		return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
			"organization %q does not exist (neither in the bundle nor in the database)", a.OrganizationID)}
	default:
		return fmt.Errorf("write app %q: %w", a.ID, err)
	}
	if !changed {
		// An app another transaction created after this import locked
		// the apps it knew is not in owners: its owner is read here, so
		// that it cannot be moved either.
		var owner string
		if err := im.tx.QueryRow(ctx, `SELECT organization_id FROM apps WHERE id = $1`, a.ID).Scan(&owner); err != nil {
			return fmt.Errorf("read the organization of app %q: %w", a.ID, err)
		}
		if owner != a.OrganizationID {
			return content.Problem{Path: "organizationId", Message: fmt.Sprintf(
				"app %q belongs to organization %q; an app cannot move to another organization", a.ID, owner)}
		}
		im.owners[a.ID] = a.OrganizationID
		return nil
	}
	im.owners[a.ID] = a.OrganizationID
	im.notify[a.ID] = true
	if _, err := im.tx.Exec(ctx, `DELETE FROM channel_keys WHERE app_id = $1`, a.ID); err != nil {
		return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
	}
	for i, ch := range a.Channels {
		if ch.Key == "" {
			continue
		}
		// DO NOTHING rather than a unique violation, which would abort the
		// transaction before the other app could be named.
		tag, err := im.tx.Exec(ctx, `INSERT INTO channel_keys (key, app_id, channel_id) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
			ch.Key, a.ID, ch.ID)
		if err != nil {
			return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
		}
		if tag.RowsAffected() == 0 {
			var other string
			if err := im.tx.QueryRow(ctx, `SELECT app_id FROM channel_keys WHERE key = $1`, ch.Key).Scan(&other); err != nil {
				return fmt.Errorf("write channel keys of app %q: %w", a.ID, err)
			}
			return content.Problem{Path: fmt.Sprintf("channels[%d].key", i), Message: fmt.Sprintf(
				"%q is already the key of a channel of app %q", ch.Key, other)}
		}
	}
	return nil
}

// records writes recs[start:end] in one round trip: an insert and an
// update for each, read back in order so that a failure names its record.
func (im *importer) records(ctx context.Context, recs []content.Record, start, end int) (err error) {
	batch := &pgx.Batch{}
	for _, r := range recs[start:end] {
		doc, loc := docText(r.Doc), nullString(r.Location)
		batch.Queue(`INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $6)
			ON CONFLICT (app_id, kind, id) DO NOTHING`,
			r.AppID, string(r.Kind), r.ID, doc, loc, im.now)
		batch.Queue(`UPDATE records SET doc = $4::jsonb, location = $5, updated_at = $6
			WHERE app_id = $1 AND kind = $2 AND id = $3 AND doc IS DISTINCT FROM $4::jsonb`,
			r.AppID, string(r.Kind), r.ID, doc, loc, im.now)
	}
	br := im.tx.SendBatch(ctx, batch)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("import: write records: %w", cerr)
		}
	}()
	for i := start; i < end; i++ {
		r := recs[i]
		created, updated, err := pairResult(br)
		if err != nil {
			return &content.ItemError{Section: content.SectionRecords, Index: i, Err: im.recordError(r, err)}
		}
		im.count(created, updated)
		if created || updated {
			im.changed[r.AppID], im.notify[r.AppID] = true, true
		}
		im.tick()
	}
	return nil
}

func (im *importer) recordError(r content.Record, err error) error {
	// The only foreign key of records is its app.
	if pgErrorCode(err) == foreignKeyViolation {
		return content.Problem{Path: "appId", Message: fmt.Sprintf(
			"app %q does not exist (neither in the bundle nor in the database)", r.AppID)}
	}
	return fmt.Errorf("write %s %q: %w", r.Kind, r.ID, err)
}

// Export implements content.Store. It reads in one read-only snapshot, so
// the bundle is consistent even while others write.
func (s *Store) Export(ctx context.Context, f content.ExportFilter) (_ *content.Bundle, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("export: begin: %w", err)
	}
	// Nothing was written; rolling back ends the snapshot.
	defer func() { err = errors.Join(err, ignoreClosed(tx.Rollback(context.WithoutCancel(ctx)))) }()
	var b content.Bundle
	if b.Apps, err = listApps(ctx, tx, f); err != nil {
		return nil, fmt.Errorf("export apps: %w", err)
	}
	orgs := map[string]bool{}
	for _, a := range b.Apps {
		if !orgs[a.OrganizationID] {
			orgs[a.OrganizationID] = true
			o, err := organization(ctx, tx, a.OrganizationID)
			if err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
			b.Organizations = append(b.Organizations, o)
		}
	}
	if f.AppID == "" && f.OrganizationID != "" && len(b.Organizations) == 0 {
		// An organization without apps is still exported.
		o, err := organization(ctx, tx, f.OrganizationID)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		b.Organizations = append(b.Organizations, o)
	}
	if f.AppID == "" && f.OrganizationID == "" {
		if b.Organizations, err = listOrganizations(ctx, tx); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	for _, a := range b.Apps {
		for _, k := range content.Kinds() {
			recs, err := listRecords(ctx, tx, a.ID, k)
			if err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
			b.Records = append(b.Records, recs...)
		}
	}
	return &b, nil
}

// write runs fn in a transaction that first moves the app's revision and
// announces it (NOTIFY is delivered on commit, and not at all on
// rollback). Locking the app row before any record is the lock order
// Import keeps too; it also serializes writes to one app, which the
// revision update would do anyway.
func (s *Store) write(ctx context.Context, appID, what string, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreClosed(tx.Rollback(context.WithoutCancel(ctx))))
		}
	}()
	tag, err := tx.Exec(ctx,
		`WITH moved AS (UPDATE apps SET revision = revision + 1 WHERE id = $1 RETURNING id)
		 SELECT pg_notify($2, id) FROM moved`, appID, revisionChannel)
	if err != nil {
		return fmt.Errorf("%s: move revision: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("app %q: %w", appID, content.ErrNotFound)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// CreateRecord implements content.Store.
func (s *Store) CreateRecord(ctx context.Context, r content.Record) (content.Record, error) {
	t := now()
	r.CreatedAt, r.UpdatedAt = t, t
	err := s.write(ctx, r.AppID, fmt.Sprintf("create %s %q", r.Kind, r.ID), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO records (app_id, kind, id, doc, location, created_at, updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $6)`,
			r.AppID, string(r.Kind), r.ID, docText(r.Doc), nullString(r.Location), t)
		if err == nil {
			return nil
		}
		switch pgErrorCode(err) {
		case uniqueViolation:
			return fmt.Errorf("%s %q of app %q: %w", r.Kind, r.ID, r.AppID, content.ErrConflict)
		case foreignKeyViolation:
			return fmt.Errorf("app %q: %w", r.AppID, content.ErrNotFound)
		}
		return fmt.Errorf("create %s %q: %w", r.Kind, r.ID, err)
	})
	if err != nil {
		return content.Record{}, err
	}
	return r, nil
}

// UpdateRecord implements content.Store. SELECT ... FOR UPDATE holds the
// record from the read to the write, so concurrent read-modify-writes
// apply one after another and lose nothing.
func (s *Store) UpdateRecord(ctx context.Context, appID string, kind content.Kind, id string, change func(content.Record) (content.Record, error)) (content.Record, error) {
	var out content.Record
	err := s.write(ctx, appID, fmt.Sprintf("update %s %q", kind, id), func(tx pgx.Tx) error {
		cur, err := record(ctx, tx, appID, kind, id, ` FOR UPDATE`)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.Kind, next.AppID, next.ID, next.CreatedAt = kind, appID, id, cur.CreatedAt
		next.UpdatedAt = now()
		if _, err := tx.Exec(ctx, `UPDATE records SET doc = $4::jsonb, location = $5, updated_at = $6 WHERE app_id = $1 AND kind = $2 AND id = $3`,
			appID, string(kind), id, docText(next.Doc), nullString(next.Location), next.UpdatedAt); err != nil {
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
	err := s.write(ctx, appID, fmt.Sprintf("delete %s %q", kind, id), func(tx pgx.Tx) error {
		cur, err := scanRecord(tx.QueryRow(ctx, `DELETE FROM records WHERE app_id = $1 AND kind = $2 AND id = $3 RETURNING `+recordColumns,
			appID, string(kind), id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s %q of app %q: %w", kind, id, appID, content.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, id, err)
		}
		out = cur
		return nil
	})
	return out, err
}

// AppByChannelKey implements content.Store, in one query: channel_keys
// and apps share no column name.
func (s *Store) AppByChannelKey(ctx context.Context, key string) (tenancy.App, string, error) {
	row := &withChannel{Row: s.pool.QueryRow(ctx,
		`SELECT `+appColumns+`, channel_id FROM channel_keys JOIN apps ON apps.id = channel_keys.app_id WHERE key = $1`, key)}
	app, err := scanApp(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.App{}, "", fmt.Errorf("channel key %q: %w", key, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, "", fmt.Errorf("look up channel key %q: %w", key, err)
	}
	return app, row.channelID, nil
}

// withChannel scans an app row followed by a channel ID.
type withChannel struct {
	pgx.Row
	channelID string
}

func (r *withChannel) Scan(dest ...any) error { return r.Row.Scan(append(dest, &r.channelID)...) }
