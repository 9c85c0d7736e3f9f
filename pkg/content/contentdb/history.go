package contentdb

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// pageSize is limit within 1..content.MaxHistoryPage; zero means the most.
func pageSize(limit int) int {
	if limit <= 0 || limit > content.MaxHistoryPage {
		return content.MaxHistoryPage
	}
	return limit
}

// Revisions implements content.Store.
func (s *DB) Revisions(ctx context.Context, appID string, kind content.Kind, id string, before int64, limit int) ([]content.Revision, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT app_id, kind, id, revision, deleted, doc, COALESCE(location, ''), changed_at, audit_id
		FROM revisions WHERE app_id = ? AND kind = ? AND id = ? AND revision < ? ORDER BY revision DESC LIMIT ?`),
		appID, string(kind), id, before, pageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("read the revisions of %s %q: %w", kind, id, err)
	}
	defer rows.Close()
	var revs []content.Revision
	size := 0
	// Rows are read one at a time, and the page ends once its documents
	// reach MaxHistoryBytes: a record's states may each be megabytes.
	for size < content.MaxHistoryBytes && rows.Next() {
		rev, err := s.scanRevision(rows)
		if err != nil {
			return nil, fmt.Errorf("read the revisions of %s %q: %w", kind, id, err)
		}
		revs = append(revs, rev)
		size += len(rev.Doc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the revisions of %s %q: %w", kind, id, err)
	}
	return revs, nil
}

func (s *DB) scanRevision(r sqldb.Scanner) (content.Revision, error) {
	var (
		rev  content.Revision
		kind string
		doc  []byte
	)
	at := s.db.NewTime(false)
	dests := append([]any{&rev.AppID, &kind, &rev.ID, &rev.Revision, &rev.Deleted, &doc, &rev.Location}, at.Dests()...)
	if err := r.Scan(append(dests, &rev.AuditID)...); err != nil {
		return content.Revision{}, err
	}
	rev.Kind = content.Kind(kind)
	var err error
	if rev.Doc, err = s.db.ReadDoc(doc); err != nil {
		return content.Revision{}, fmt.Errorf("revision %d doc: %w", rev.Revision, err)
	}
	if rev.ChangedAt, err = at.Value(); err != nil {
		return content.Revision{}, fmt.Errorf("revision %d changed_at: %w", rev.Revision, err)
	}
	return rev, nil
}

// AuditLog implements content.Store.
func (s *DB) AuditLog(ctx context.Context, f content.AuditFilter) ([]content.AuditEntry, error) {
	where := []string{"app_id = ?"}
	args := []any{f.AppID}
	add := func(cond string, arg ...any) {
		where = append(where, cond)
		args = append(args, arg...)
	}
	if !f.From.IsZero() {
		add("at >= ?", s.db.TimeArgs(f.From, false)[0])
	}
	if !f.To.IsZero() {
		add("at < ?", s.db.TimeArgs(f.To, false)[0])
	}
	if f.TokenID != "" {
		add("token_id = ?", f.TokenID)
	}
	if f.LocalUser != "" {
		add("local_user = ?", f.LocalUser)
	}
	if f.Operation != "" {
		add("operation = ?", f.Operation)
	}
	if f.Before > 0 {
		add("id < ?", f.Before)
	}
	if f.Kind != "" {
		// The operations that wrote the record, and those that named it
		// and changed nothing.
		add("(subject = ? OR id IN (SELECT audit_id FROM revisions WHERE app_id = ? AND kind = ? AND id = ?))",
			string(f.Kind)+"/"+f.ID, f.AppID, string(f.Kind), f.ID)
	}
	args = append(args, pageSize(f.Limit))
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT id, at, organization_id, COALESCE(app_id, ''), operation, subject,
		token_id, token_name, local_user, client_net, user_agent, request_id, created, updated, deleted, unchanged
		FROM audit WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("read the audit log of app %q: %w", f.AppID, err)
	}
	entries, err := sqldb.Collect(rows, s.scanAudit)
	if err != nil {
		return nil, fmt.Errorf("read the audit log of app %q: %w", f.AppID, err)
	}
	return entries, nil
}

func (s *DB) scanAudit(r sqldb.Scanner) (content.AuditEntry, error) {
	var e tenancy.AuditEntry
	at := s.db.NewTime(false)
	dests := append([]any{&e.ID}, at.Dests()...)
	dests = append(dests, &e.OrganizationID, &e.AppID, &e.Operation, &e.Subject,
		&e.Actor.TokenID, &e.Actor.TokenName, &e.Actor.LocalUser, &e.Actor.ClientNet, &e.Actor.UserAgent, &e.Actor.RequestID,
		&e.Created, &e.Updated, &e.Deleted, &e.Unchanged)
	if err := r.Scan(dests...); err != nil {
		return e, err
	}
	var err error
	if e.At, err = at.Value(); err != nil {
		return e, fmt.Errorf("audit entry %d at: %w", e.ID, err)
	}
	return e, nil
}

// PruneHistory implements content.Store. Each app is pruned in a
// transaction of its own, so that one large app holds no lock on the
// others.
func (s *DB) PruneHistory(ctx context.Context, before time.Time, keep int) (content.Pruned, error) {
	var out content.Pruned
	keep = max(keep, 1)
	cut := s.db.TimeArgs(before, false)[0]
	apps, err := s.FindApps(ctx, s.db.SQL(), "", "")
	if err != nil {
		return out, fmt.Errorf("prune history: %w", err)
	}
	for _, a := range apps {
		err := s.db.InTx(ctx, "prune history", func(tx *sql.Tx) error {
			// Versions published before the cutoff go, but the newest keep
			// and the live one; their records' revisions may then go too.
			res, err := tx.ExecContext(ctx, s.db.Q(`DELETE FROM versions WHERE app_id = ? AND published_at < ?
				AND version NOT IN (SELECT version FROM versions WHERE app_id = ? ORDER BY version DESC LIMIT ?)
				AND version <> COALESCE((SELECT live_version FROM apps WHERE id = ?), 0)`), a.ID, cut, a.ID, keep, a.ID)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			out.Versions += int(n)
			// The newest keep revisions of each record stay, its current
			// state among them, however old, and so do those a published
			// version names.
			res, err = tx.ExecContext(ctx, s.db.Q(`DELETE FROM revisions WHERE app_id = ? AND (kind, id, revision) IN (
				SELECT kind, id, revision FROM (
					SELECT kind, id, revision, changed_at, row_number() OVER (PARTITION BY kind, id ORDER BY revision DESC) AS n
					FROM revisions WHERE app_id = ?) AS ranked
				WHERE n > ? AND changed_at < ?
					AND NOT EXISTS (SELECT 1 FROM version_records v
						WHERE v.app_id = ? AND v.kind = ranked.kind AND v.id = ranked.id AND v.revision = ranked.revision))`), a.ID, a.ID, keep, cut, a.ID)
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			out.Revisions += int(n)
			// The app can no longer be restored to before the cutoff.
			_, err = tx.ExecContext(ctx, s.db.Q(`UPDATE apps SET history_pruned_before = ?
				WHERE id = ? AND (history_pruned_before IS NULL OR history_pruned_before < ?)`), cut, a.ID, cut)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("prune the history of app %q: %w", a.ID, err)
		}
	}
	// An entry a kept revision names stays: a revision always tells who
	// made it. Neither engine keeps an index of the revisions' entries:
	// PostgreSQL reads them once for an anti-join, SQLite into a
	// temporary index.
	named := `NOT EXISTS (SELECT 1 FROM revisions WHERE revisions.audit_id = audit.id)`
	if s.db.Engine() == sqldb.SQLite {
		named = `id NOT IN (SELECT audit_id FROM revisions)`
	}
	// So does a version's: who published it.
	named += ` AND NOT EXISTS (SELECT 1 FROM versions WHERE versions.audit_id = audit.id)`
	res, err := s.db.SQL().ExecContext(ctx, s.db.Q(`DELETE FROM audit WHERE at < ? AND `+named), cut)
	if err != nil {
		return out, fmt.Errorf("prune the audit log: %w", err)
	}
	n, err := res.RowsAffected()
	out.Entries = int(n)
	if err != nil {
		return out, fmt.Errorf("prune the audit log: %w", err)
	}
	// Webhook deliveries delivered or failed before it go, their attempts
	// with them; pending ones stay.
	res, err = s.db.SQL().ExecContext(ctx, s.db.Q(`DELETE FROM webhook_deliveries WHERE state <> 'pending' AND queued_at < ?`), cut)
	if err != nil {
		return out, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	n, err = res.RowsAffected()
	out.Deliveries = int(n)
	if err != nil {
		return out, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	// What watched topics told before it is not told again anyway: a
	// minute's error rate is past, a gap group that old opened long ago.
	if _, err := s.db.SQL().ExecContext(ctx, s.db.Q(`DELETE FROM webhook_told WHERE told_at < ?`), cut); err != nil {
		return out, fmt.Errorf("prune what webhooks were told: %w", err)
	}
	return out, nil
}
