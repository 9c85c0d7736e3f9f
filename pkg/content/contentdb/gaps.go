package contentdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// GapProblems is a decision or settings refused for what they hold.
type GapProblems []content.Problem

func (ps GapProblems) Error() string {
	if len(ps) == 1 {
		return ps[0].Error()
	}
	return fmt.Sprintf("%s (and %d more problems)", ps[0].Error(), len(ps)-1)
}

// appOrganization locks app's row for the transaction and returns its
// organization.
func (s *DB) appOrganization(ctx context.Context, tx *sql.Tx, app string) (string, error) {
	var org string
	err := tx.QueryRowContext(ctx, s.db.Q(`SELECT organization_id FROM apps WHERE id = ?`+s.db.Lock(" FOR UPDATE")), app).Scan(&org)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("app %q: %w", app, content.ErrNotFound)
	}
	return org, err
}

// DecideGap records d, replacing an earlier decision on its group, with
// an audit entry (operation resolveGap or dismissGap unless the context
// names one) by the context's actor. DecidedAt and AuditID are set.
func (s *DB) DecideGap(ctx context.Context, d content.GapDecision) (content.GapDecision, error) {
	if ps := d.Check(); len(ps) > 0 {
		return d, GapProblems(ps)
	}
	wordings, err := json.Marshal(d.Wordings)
	if err != nil {
		return d, fmt.Errorf("decide gap %s of app %s: %w", d.GroupID, d.AppID, err)
	}
	op := "resolveGap"
	if d.State == content.GapDismissed {
		op = "dismissGap"
	}
	err = s.db.InTx(ctx, "decide gap "+d.GroupID, func(tx *sql.Tx) error {
		org, err := s.appOrganization(ctx, tx, d.AppID)
		if err != nil {
			return err
		}
		same, err := s.roomForGap(ctx, tx, d, len(wordings))
		if err != nil {
			return err
		}
		e := tenancy.AuditEntry{OrganizationID: org, AppID: d.AppID, Operation: op, Subject: "gap/" + d.GroupID, Created: 1 - same, Updated: same}
		if d.AuditID, err = s.Audit(ctx, tx, e); err != nil {
			return err
		}
		d.DecidedAt = s.db.Now()
		_, err = tx.ExecContext(ctx, s.db.Q(`INSERT INTO gap_decisions (app_id, group_id, state, reason, wordings, users, decided_at, audit_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (app_id, group_id) DO UPDATE SET state = excluded.state, reason = excluded.reason, wordings = excluded.wordings,
				users = excluded.users, decided_at = excluded.decided_at, audit_id = excluded.audit_id`),
			d.AppID, d.GroupID, string(d.State), d.Reason, string(wordings), d.Users, s.db.TimeArgs(d.DecidedAt, false)[0], d.AuditID)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("decide gap %s of app %s: %w", d.GroupID, d.AppID, err)
	}
	return d, nil
}

// gapQuerier runs the reads of roomForGap in a transaction or not.
type gapQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// roomForGap refuses d, whose wordings are n bytes of JSON, when the app
// would keep more decisions, or bytes of them, than it may; same is 1
// when d replaces a decision on its group.
func (s *DB) roomForGap(ctx context.Context, q gapQuerier, d content.GapDecision, n int) (same int, err error) {
	var kept, others int64
	if err := q.QueryRowContext(ctx, s.db.Q(`SELECT count(*), count(CASE WHEN group_id = ? THEN 1 END),
		COALESCE(sum(CASE WHEN group_id = ? THEN 0 ELSE length(wordings) + length(reason) END), 0) FROM gap_decisions WHERE app_id = ?`),
		d.GroupID, d.GroupID, d.AppID).Scan(&kept, &same, &others); err != nil {
		return 0, err
	}
	if (same == 0 && kept >= content.MaxGapDecisions) || others+int64(n+len(d.Reason)) > content.MaxGapDecisionBytes {
		return 0, content.ErrTooManyGapDecisions
	}
	return same, nil
}

// CheckGapDecision refuses d as DecideGap would, writing nothing: what
// is written for a decision (an FAQ, say) is checked before.
func (s *DB) CheckGapDecision(ctx context.Context, d content.GapDecision) error {
	if ps := d.Check(); len(ps) > 0 {
		return GapProblems(ps)
	}
	wordings, err := json.Marshal(d.Wordings)
	if err != nil {
		return err
	}
	_, err = s.roomForGap(ctx, s.db.SQL(), d, len(wordings))
	return err
}

// ReopenGap forgets the decision on an app's group, with an audit entry;
// content.ErrNotFound when there is none.
func (s *DB) ReopenGap(ctx context.Context, app, group string) error {
	err := s.db.InTx(ctx, "reopen gap "+group, func(tx *sql.Tx) error {
		org, err := s.appOrganization(ctx, tx, app)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.db.Q(`DELETE FROM gap_decisions WHERE app_id = ? AND group_id = ?`), app, group)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("gap %q: %w", group, content.ErrNotFound))
		}
		_, err = s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: org, AppID: app, Operation: "reopenGap", Subject: "gap/" + group, Deleted: 1})
		return err
	})
	if err != nil {
		return fmt.Errorf("reopen gap %s of app %s: %w", group, app, err)
	}
	return nil
}

// GapDecisions lists an app's decisions, newest first (at most
// content.MaxGapDecisions).
func (s *DB) GapDecisions(ctx context.Context, app string) ([]content.GapDecision, error) {
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT group_id, state, reason, wordings, users, decided_at, audit_id FROM gap_decisions
		WHERE app_id = ? ORDER BY audit_id DESC`), app)
	if err != nil {
		return nil, fmt.Errorf("read the gap decisions of app %s: %w", app, err)
	}
	defer rows.Close()
	var out []content.GapDecision
	for rows.Next() {
		d := content.GapDecision{AppID: app}
		var state, wordings string
		at := s.db.NewTime(false)
		if err := rows.Scan(append([]any{&d.GroupID, &state, &d.Reason, &wordings, &d.Users}, append(at.Dests(), &d.AuditID)...)...); err != nil {
			return nil, fmt.Errorf("read the gap decisions of app %s: %w", app, err)
		}
		d.State = content.GapState(state)
		if d.DecidedAt, err = at.Value(); err != nil {
			return nil, fmt.Errorf("gap decision %s of app %s: decided_at: %w", d.GroupID, app, err)
		}
		if err := json.Unmarshal([]byte(wordings), &d.Wordings); err != nil {
			return nil, fmt.Errorf("gap decision %s of app %s: wordings: %w", d.GroupID, app, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the gap decisions of app %s: %w", app, err)
	}
	return out, nil
}

// GapSettings returns an app's gap inbox settings, the defaults when it
// set none.
func (s *DB) GapSettings(ctx context.Context, app string) (content.GapSettings, error) {
	g := content.DefaultGapSettings()
	err := s.db.SQL().QueryRowContext(ctx, s.db.Q(`SELECT low_confidence, regrow_factor FROM gap_settings WHERE app_id = ?`), app).Scan(&g.LowConfidence, &g.RegrowFactor)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return g, fmt.Errorf("read the gap settings of app %s: %w", app, err)
	}
	return g, nil
}

// SetGapSettings sets an app's gap inbox settings, with an audit entry.
func (s *DB) SetGapSettings(ctx context.Context, app string, g content.GapSettings) error {
	if ps := g.Check(); len(ps) > 0 {
		return GapProblems(ps)
	}
	err := s.db.InTx(ctx, "set gap settings", func(tx *sql.Tx) error {
		org, err := s.appOrganization(ctx, tx, app)
		if err != nil {
			return err
		}
		if _, err := s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: org, AppID: app, Operation: "setGapSettings", Subject: "gapSettings", Updated: 1}); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.db.Q(`INSERT INTO gap_settings (app_id, low_confidence, regrow_factor) VALUES (?, ?, ?)
			ON CONFLICT (app_id) DO UPDATE SET low_confidence = excluded.low_confidence, regrow_factor = excluded.regrow_factor`),
			app, g.LowConfidence, g.RegrowFactor)
		return err
	})
	if err != nil {
		return fmt.Errorf("set the gap settings of app %s: %w", app, err)
	}
	return nil
}
