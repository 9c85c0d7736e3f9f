package tenancydb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const auditInsert = `INSERT INTO audit (at, organization_id, app_id, operation, subject,
	token_id, token_name, local_user, client_net, user_agent, request_id, created, updated, deleted, unchanged)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// moveAudit is MoveAndAudit's statement on PostgreSQL: $1 the app, $2
// the notification channel, then auditInsert's values but the
// organization and the app.
const moveAudit = `WITH moved AS (UPDATE apps SET revision = revision + 1 WHERE id = $1 RETURNING id, revision, organization_id),
	entry AS (INSERT INTO audit (at, organization_id, app_id, operation, subject,
		token_id, token_name, local_user, client_net, user_agent, request_id, created, updated, deleted, unchanged)
		SELECT $3, organization_id, id, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 FROM moved RETURNING id)
	SELECT m.revision, m.organization_id, e.id FROM moved m, entry e, LATERAL pg_notify($2, m.id)`

// Audit writes the entry of an operation in tx, before the operation
// changes anything: the database's triggers give each change of an app's
// records the app's newest entry of the transaction, and refuse a change
// without one. Who made it comes from ctx (tenancy.WithActor), never from
// e; when is the database's clock; the operation's name is ctx's, or else
// e's. It fails with tenancy.ErrNoActor when ctx carries no actor.
func (s *Store) Audit(ctx context.Context, tx *sql.Tx, e tenancy.AuditEntry) (int64, error) {
	args, err := s.auditArgs(ctx, e)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := s.auditStmt.QueryRowIn(ctx, tx, args...).Scan(&id); err != nil {
		return 0, fmt.Errorf("%s: write the audit entry: %w", e.Operation, err)
	}
	return id, nil
}

// auditArgs are the values of an audit entry's columns, from at to
// unchanged, as auditInsert takes them; an error without an actor.
func (s *Store) auditArgs(ctx context.Context, e tenancy.AuditEntry) ([]any, error) {
	a, ok := tenancy.ActorOf(ctx)
	if !ok || a.TokenID == "" && a.LocalUser == "" {
		return nil, fmt.Errorf("%s: %w", e.Operation, tenancy.ErrNoActor)
	}
	return []any{s.db.TimeArgs(s.db.Now(), false)[0], e.OrganizationID, sqldb.NullString(e.AppID), tenancy.OperationOf(ctx, e.Operation), e.Subject,
		a.TokenID, a.TokenName, a.LocalUser, a.ClientNet, a.UserAgent, a.RequestID,
		e.Created, e.Updated, e.Deleted, e.Unchanged}, nil
}

// Moved is an app whose revision a write moved, and the write's audit
// entry.
type Moved struct {
	App, Org string
	// Revision is the one the write's changes take.
	Revision int64
	Audit    int64
}

// MoveAndAudit moves the app's revision on in tx, announced on commit
// (see sqldb.DB.MoveRevision), and writes the audit entry of the
// operation about to change it, e's organization and app being the
// app's: on PostgreSQL in one statement, as a single-record write makes
// it for each change. found is false when there is no such app.
func (s *Store) MoveAndAudit(ctx context.Context, tx *sql.Tx, appID string, e tenancy.AuditEntry) (m Moved, found bool, err error) {
	e.AppID = appID
	args, err := s.auditArgs(ctx, e)
	if err != nil {
		return Moved{}, false, err
	}
	m.App = appID
	if s.db.Engine() == sqldb.Postgres {
		// The organization's and app's columns come from the moved row.
		args = append([]any{appID, sqldb.RevisionChannel}, append(args[:1], args[3:]...)...)
		err = s.moveAuditStmt.QueryRowIn(ctx, tx, args...).Scan(&m.Revision, &m.Org, &m.Audit)
	} else {
		var ok bool
		if m.Revision, m.Org, ok, err = s.db.MoveRevision(ctx, tx, appID); err != nil || !ok {
			return Moved{}, false, err
		}
		args[1] = m.Org
		err = s.auditStmt.QueryRowIn(ctx, tx, args...).Scan(&m.Audit)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Moved{}, false, nil
	}
	if err != nil {
		return Moved{}, false, fmt.Errorf("%s: move the revision and write the audit entry: %w", e.Operation, err)
	}
	return m, true, nil
}

// Counted records in tx, at the end of the operation of entry id, what it
// wrote; the transaction has not committed, so no reader saw the entry
// without its counts.
func (s *Store) Counted(ctx context.Context, tx *sql.Tx, id int64, created, updated, deleted, unchanged int) error {
	_, err := tx.ExecContext(ctx, s.db.Q(`UPDATE audit SET created = ?, updated = ?, deleted = ?, unchanged = ? WHERE id = ?`),
		created, updated, deleted, unchanged, id)
	if err != nil {
		return fmt.Errorf("count the changes of audit entry %d: %w", id, err)
	}
	return nil
}
