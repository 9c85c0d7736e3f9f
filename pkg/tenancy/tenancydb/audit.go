package tenancydb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const auditInsert = `INSERT INTO audit (at, organization_id, app_id, operation, subject,
	token_id, token_name, local_user, client_net, user_agent, request_id, created, updated, deleted, unchanged)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// Audit writes the entry of an operation in tx, before the operation
// changes anything: the database's triggers give each change of an app's
// records the app's newest entry of the transaction, and refuse a change
// without one. Who made it comes from ctx (tenancy.WithActor), never from
// e; when is the database's clock; the operation's name is ctx's, or else
// e's. It fails with tenancy.ErrNoActor when ctx carries no actor.
func (s *Store) Audit(ctx context.Context, tx *sql.Tx, e tenancy.AuditEntry) (int64, error) {
	a, ok := tenancy.ActorOf(ctx)
	if !ok || a.TokenID == "" && a.LocalUser == "" {
		return 0, fmt.Errorf("%s: %w", e.Operation, tenancy.ErrNoActor)
	}
	var id int64
	err := s.auditStmt.QueryRowIn(ctx, tx,
		s.db.TimeArgs(s.db.Now(), false)[0], e.OrganizationID, sqldb.NullString(e.AppID), tenancy.OperationOf(ctx, e.Operation), e.Subject,
		a.TokenID, a.TokenName, a.LocalUser, a.ClientNet, a.UserAgent, a.RequestID,
		e.Created, e.Updated, e.Deleted, e.Unchanged).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("%s: write the audit entry: %w", e.Operation, err)
	}
	return id, nil
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
