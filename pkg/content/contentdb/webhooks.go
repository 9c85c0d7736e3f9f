package contentdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

const webhookColumns = `app_id, id, url, topics, error_rate, secret, previous_secret, previous_until, created_at`

func (s *DB) scanWebhook(r sqldb.Scanner) (webhooks.Webhook, error) {
	var (
		w      webhooks.Webhook
		topics string
	)
	until, created := s.db.NewTime(false), s.db.NewTime(false)
	dests := append([]any{&w.AppID, &w.ID, &w.URL, &topics, &w.ErrorRate, &w.Secret, &w.PreviousSecret}, until.Dests()...)
	if err := r.Scan(append(dests, created.Dests()...)...); err != nil {
		return w, err
	}
	w.Topics = strings.Split(topics, ",")
	var err error
	if w.PreviousUntil, err = until.Value(); err != nil {
		return w, fmt.Errorf("webhook %q previous_until: %w", w.ID, err)
	}
	if w.CreatedAt, err = created.Value(); err != nil {
		return w, fmt.Errorf("webhook %q created_at: %w", w.ID, err)
	}
	return w, nil
}

// webhookAudit writes, in tx, the audit entry of an operation on an
// app's webhook; it locks the app's row.
func (s *DB) webhookAudit(ctx context.Context, tx *sql.Tx, app, op, id string, created, updated, deleted int) error {
	org, err := s.appOrganization(ctx, tx, app)
	if err != nil {
		return err
	}
	_, err = s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: org, AppID: app, Operation: op, Subject: "webhook/" + id,
		Created: created, Updated: updated, Deleted: deleted})
	return err
}

// CreateWebhook registers an endpoint with a new secret, audited
// (createWebhook). It fails with content.ErrConflict when the app has an
// endpoint of that ID, and with ErrTooManyWebhooks past the bound. The
// URL's destination is the caller's to check.
func (s *DB) CreateWebhook(ctx context.Context, w webhooks.Webhook) (webhooks.Webhook, error) {
	if errs := w.Check(); len(errs) > 0 {
		return w, errors.Join(errs...)
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		return w, err
	}
	w.Secret, w.PreviousSecret, w.PreviousUntil = secret, "", time.Time{}
	err = s.db.InTx(ctx, "create webhook", func(tx *sql.Tx) error {
		if err := s.webhookAudit(ctx, tx, w.AppID, "createWebhook", w.ID, 1, 0, 0); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.db.Q(`SELECT count(*) FROM webhooks WHERE app_id = ?`), w.AppID).Scan(&n); err != nil {
			return err
		}
		if n >= webhooks.MaxWebhooks {
			return webhooks.ErrTooManyWebhooks
		}
		w.CreatedAt = s.db.Now()
		_, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO webhooks (app_id, id, url, topics, error_rate, secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			w.AppID, w.ID, w.URL, strings.Join(w.Topics, ","), w.ErrorRate, w.Secret, s.db.TimeArgs(w.CreatedAt, false)[0])
		if sqldb.IsDuplicate(err) {
			return fmt.Errorf("webhook %q: %w", w.ID, content.ErrConflict)
		}
		return err
	})
	if err != nil {
		return webhooks.Webhook{}, fmt.Errorf("create webhook %q of app %q: %w", w.ID, w.AppID, err)
	}
	return w, nil
}

// Webhook reads one endpoint of an app.
func (s *DB) Webhook(ctx context.Context, app, id string) (webhooks.Webhook, error) {
	return s.webhook(ctx, s.db.SQL(), app, id)
}

func (s *DB) webhook(ctx context.Context, q sqldb.Querier, app, id string) (webhooks.Webhook, error) {
	w, err := s.scanWebhook(q.QueryRowContext(ctx, s.db.Q(`SELECT `+webhookColumns+` FROM webhooks WHERE app_id = ? AND id = ?`), app, id))
	if errors.Is(err, sql.ErrNoRows) {
		return w, fmt.Errorf("webhook %q of app %q: %w", id, app, content.ErrNotFound)
	}
	return w, err
}

// Webhooks lists an app's endpoints by ID.
func (s *DB) Webhooks(ctx context.Context, app string) ([]webhooks.Webhook, error) {
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT `+webhookColumns+` FROM webhooks WHERE app_id = ? ORDER BY id`), app)
	if err != nil {
		return nil, fmt.Errorf("list the webhooks of app %q: %w", app, err)
	}
	ws, err := sqldb.Collect(rows, s.scanWebhook)
	if err != nil {
		return nil, fmt.Errorf("list the webhooks of app %q: %w", app, err)
	}
	return ws, nil
}

// UpdateWebhook changes an endpoint's URL, topics or error rate with what
// change makes of it (its secrets, app and ID stay), audited
// (updateWebhook).
func (s *DB) UpdateWebhook(ctx context.Context, app, id string, change func(*webhooks.Webhook) error) (webhooks.Webhook, error) {
	var w webhooks.Webhook
	err := s.db.InTx(ctx, "update webhook", func(tx *sql.Tx) error {
		if err := s.webhookAudit(ctx, tx, app, "updateWebhook", id, 0, 1, 0); err != nil {
			return err
		}
		cur, err := s.webhook(ctx, tx, app, id)
		if err != nil {
			return err
		}
		w = cur
		if err := change(&w); err != nil {
			return err
		}
		w.AppID, w.ID, w.Secret, w.PreviousSecret, w.PreviousUntil, w.CreatedAt = cur.AppID, cur.ID, cur.Secret, cur.PreviousSecret, cur.PreviousUntil, cur.CreatedAt
		if errs := w.Check(); len(errs) > 0 {
			return errors.Join(errs...)
		}
		_, err = tx.ExecContext(ctx, s.db.Q(`UPDATE webhooks SET url = ?, topics = ?, error_rate = ? WHERE app_id = ? AND id = ?`),
			w.URL, strings.Join(w.Topics, ","), w.ErrorRate, app, id)
		return err
	})
	if err != nil {
		return webhooks.Webhook{}, fmt.Errorf("update webhook %q of app %q: %w", id, app, err)
	}
	return w, nil
}

// DeleteWebhook removes an endpoint and its deliveries, audited
// (deleteWebhook).
func (s *DB) DeleteWebhook(ctx context.Context, app, id string) error {
	err := s.db.InTx(ctx, "delete webhook", func(tx *sql.Tx) error {
		if err := s.webhookAudit(ctx, tx, app, "deleteWebhook", id, 0, 0, 1); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.db.Q(`DELETE FROM webhooks WHERE app_id = ? AND id = ?`), app, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("webhook %q: %w", id, content.ErrNotFound))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete webhook %q of app %q: %w", id, app, err)
	}
	return nil
}

// RotateWebhookSecret gives an endpoint a new secret; the one it had keeps
// signing too for overlap (at most webhooks.MaxRotateAfter), so that its
// receiver can take the new one meanwhile. Audited (rotateWebhookSecret).
func (s *DB) RotateWebhookSecret(ctx context.Context, app, id string, overlap time.Duration) (webhooks.Webhook, error) {
	if overlap < 0 || overlap > webhooks.MaxRotateAfter {
		return webhooks.Webhook{}, fmt.Errorf("the overlap of two secrets is from 0 to %v", webhooks.MaxRotateAfter)
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		return webhooks.Webhook{}, err
	}
	var w webhooks.Webhook
	err = s.db.InTx(ctx, "rotate webhook secret", func(tx *sql.Tx) error {
		if err := s.webhookAudit(ctx, tx, app, "rotateWebhookSecret", id, 0, 1, 0); err != nil {
			return err
		}
		if w, err = s.webhook(ctx, tx, app, id); err != nil {
			return err
		}
		w.PreviousSecret, w.PreviousUntil, w.Secret = w.Secret, s.db.Now().Add(overlap), secret
		_, err := tx.ExecContext(ctx, s.db.Q(`UPDATE webhooks SET secret = ?, previous_secret = ?, previous_until = ? WHERE app_id = ? AND id = ?`),
			w.Secret, w.PreviousSecret, s.db.TimeArgs(w.PreviousUntil, false)[0], app, id)
		return err
	})
	if err != nil {
		return webhooks.Webhook{}, fmt.Errorf("rotate the secret of webhook %q of app %q: %w", id, app, err)
	}
	return w, nil
}

// EnqueueWebhookEvent writes a message of topic, whose JSON body is
// payload, for each endpoint of the app that asked for the topic, and
// answers how many. Messages of the content topics are written by the
// database itself (migration 8).
func (s *DB) EnqueueWebhookEvent(ctx context.Context, app, topic string, payload []byte) (int, error) {
	now := s.db.TimeArgs(s.db.Now(), false)[0]
	res, err := s.db.SQL().ExecContext(ctx, s.db.Q(`INSERT INTO webhook_deliveries (app_id, webhook_id, topic, payload, created_at, queued_at, next_attempt_at)
		SELECT app_id, id, ?, ?, ?, ?, ? FROM webhooks WHERE app_id = ? AND `+topicMatch), topic, string(payload), now, now, now, app, topic)
	if err != nil {
		return 0, fmt.Errorf("queue %s for the webhooks of app %q: %w", topic, app, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// topicMatch holds when the webhook row's topics hold the topic argument.
const topicMatch = `(',' || topics || ',') LIKE ('%,' || ? || ',%')`

const deliveryColumns = `id, app_id, webhook_id, topic, payload, created_at, queued_at, state, attempts, next_attempt_at, last_status, last_error`

func (s *DB) scanDelivery(r sqldb.Scanner) (webhooks.Delivery, error) {
	var (
		d       webhooks.Delivery
		payload string
	)
	created, queued, next := s.db.NewTime(false), s.db.NewTime(false), s.db.NewTime(false)
	dests := append(append([]any{&d.ID, &d.AppID, &d.WebhookID, &d.Topic, &payload}, created.Dests()...), queued.Dests()...)
	dests = append(append(dests, &d.State, &d.Attempts), next.Dests()...)
	if err := r.Scan(append(dests, &d.LastStatus, &d.LastError)...); err != nil {
		return d, err
	}
	d.Payload = []byte(payload)
	var err error
	if d.CreatedAt, err = created.Value(); err != nil {
		return d, err
	}
	if d.QueuedAt, err = queued.Value(); err != nil {
		return d, err
	}
	d.NextAttempt, err = next.Value()
	return d, err
}

// Deliveries lists an app's deliveries, newest first, each with its
// attempts.
func (s *DB) Deliveries(ctx context.Context, f webhooks.DeliveryFilter) ([]webhooks.Delivery, error) {
	if f.Limit <= 0 || f.Limit > webhooks.MaxDeliveriesPage {
		f.Limit = webhooks.MaxDeliveriesPage
	}
	where, args := []string{"app_id = ?"}, []any{f.App}
	for _, c := range []struct {
		cond string
		arg  any
		set  bool
	}{{"webhook_id = ?", f.Webhook, f.Webhook != ""}, {"state = ?", f.State, f.State != ""}, {"id < ?", f.Before, f.Before > 0}} {
		if c.set {
			where, args = append(where, c.cond), append(args, c.arg)
		}
	}
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id DESC LIMIT ?`), append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("list the deliveries of app %q: %w", f.App, err)
	}
	ds, err := sqldb.Collect(rows, s.scanDelivery)
	if err != nil || len(ds) == 0 {
		return ds, err
	}
	byID := map[int64]*webhooks.Delivery{}
	ids := make([]any, len(ds))
	for i := range ds {
		byID[ds[i].ID], ids[i] = &ds[i], ds[i].ID
	}
	arows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT delivery_id, attempt, at, status, error, duration_ms FROM webhook_attempts
		WHERE delivery_id IN (`+sqldb.Marks(len(ids))+`) ORDER BY delivery_id, attempt`), ids...)
	if err != nil {
		return nil, fmt.Errorf("read the attempts of app %q's deliveries: %w", f.App, err)
	}
	_, err = sqldb.Collect(arows, func(r sqldb.Scanner) (struct{}, error) {
		var (
			id int64
			a  webhooks.Attempt
			ms int64
		)
		at := s.db.NewTime(false)
		if err := r.Scan(append(append([]any{&id, &a.N}, at.Dests()...), &a.Status, &a.Error, &ms)...); err != nil {
			return struct{}{}, err
		}
		var err error
		a.At, err = at.Value()
		a.Duration = time.Duration(ms) * time.Millisecond
		if d := byID[id]; d != nil {
			d.Log = append(d.Log, a)
		}
		return struct{}{}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the attempts of app %q's deliveries: %w", f.App, err)
	}
	return ds, nil
}

// Redeliver queues a delivery again, whatever became of it, to be tried
// at once and retried as a new one is; its message ID and attempts stay.
// Audited (redeliverWebhook).
func (s *DB) Redeliver(ctx context.Context, app string, id int64) (webhooks.Delivery, error) {
	var d webhooks.Delivery
	err := s.db.InTx(ctx, "redeliver", func(tx *sql.Tx) error {
		if err := s.webhookAudit(ctx, tx, app, "redeliverWebhook", fmt.Sprintf("delivery/%d", id), 0, 1, 0); err != nil {
			return err
		}
		now := s.db.TimeArgs(s.db.Now(), false)[0]
		// The lease moves: an attempt under way no longer holds it, and
		// cannot mark it delivered over this request.
		res, err := tx.ExecContext(ctx, s.db.Q(`UPDATE webhook_deliveries SET state = 'pending', queued_at = ?, next_attempt_at = ?, lease = lease + 1
			WHERE app_id = ? AND id = ?`), now, now, app, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("delivery %d: %w", id, content.ErrNotFound))
		}
		d, err = s.scanDelivery(tx.QueryRowContext(ctx, s.db.Q(`SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`), id))
		return err
	})
	if err != nil {
		return webhooks.Delivery{}, fmt.Errorf("redeliver %d of app %q: %w", id, app, err)
	}
	return d, nil
}

// ClaimDeliveries implements webhooks.Store: up to n deliveries due at
// now, at most one of each app and none of busy apps, leased until
// now+lease. A claim counts the attempt and moves the delivery's lease,
// which its outcome must still hold (FinishAttempt). Of processes
// claiming at once, each delivery goes to one; on PostgreSQL a claim
// skips rows others hold (a claim, a write merging into its message)
// rather than waiting for them.
func (s *DB) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, n int, busy []string) ([]webhooks.Claim, error) {
	at, until := s.db.TimeArgs(now, false)[0], s.db.TimeArgs(now.Add(lease), false)[0]
	notBusy := ""
	args := []any{until, at}
	if len(busy) > 0 {
		notBusy = ` AND app_id NOT IN (` + sqldb.Marks(len(busy)) + `)`
		for _, b := range busy {
			args = append(args, b)
		}
	}
	args = append(args, n, at)
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`UPDATE webhook_deliveries SET next_attempt_at = ?, attempts = attempts + 1, lease = lease + 1
		WHERE id IN (SELECT id FROM webhook_deliveries WHERE id IN (
			SELECT id FROM (
				SELECT id, next_attempt_at, row_number() OVER (PARTITION BY app_id ORDER BY next_attempt_at, id) AS n
				FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= ?`+notBusy+`) AS due
			WHERE n = 1 ORDER BY next_attempt_at, id LIMIT ?)`+s.db.Lock(` FOR UPDATE SKIP LOCKED`)+`)
		AND state = 'pending' AND next_attempt_at <= ?
		RETURNING `+deliveryColumns+`, lease`), args...)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	claims, err := sqldb.Collect(rows, func(r sqldb.Scanner) (webhooks.Claim, error) {
		var c webhooks.Claim
		var err error
		c.Delivery, err = s.scanDelivery(leaseScanner{r, &c.Lease})
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	out := claims[:0]
	for _, c := range claims {
		w, err := s.Webhook(ctx, c.AppID, c.WebhookID)
		if errors.Is(err, content.ErrNotFound) {
			continue // deleted meanwhile, its deliveries with it
		}
		if err != nil {
			return out, fmt.Errorf("claim webhook deliveries: %w", err)
		}
		c.Webhook = w
		out = append(out, c)
	}
	return out, nil
}

// leaseScanner scans a delivery's columns and then its lease.
type leaseScanner struct {
	sqldb.Scanner
	lease *int64
}

func (l leaseScanner) Scan(dest ...any) error { return l.Scanner.Scan(append(dest, l.lease)...) }

// FinishAttempt implements webhooks.Store: the attempt is logged, and the
// delivery takes its outcome if the attempt's claim still holds it (no
// redelivery, nor another claim after the lease ended, came since). A
// delivery gone with its webhook is left gone.
func (s *DB) FinishAttempt(ctx context.Context, id, lease int64, a webhooks.Attempt, state string, next time.Time) error {
	err := s.db.InTx(ctx, "finish webhook attempt", func(tx *sql.Tx) error {
		// Guarded rather than refused by the foreign key: on PostgreSQL a
		// refusal would end the transaction.
		if _, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error, duration_ms)
			SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = ?)`),
			id, a.N, s.db.TimeArgs(a.At, false)[0], a.Status, a.Error, a.Duration.Milliseconds(), id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.db.Q(`UPDATE webhook_deliveries SET state = ?, next_attempt_at = ?, last_status = ?, last_error = ? WHERE id = ? AND lease = ?`),
			state, s.db.TimeArgs(next, false)[0], a.Status, a.Error, id, lease)
		return err
	})
	if err != nil {
		return fmt.Errorf("record attempt %d of delivery %d: %w", a.N, id, err)
	}
	return nil
}

// WebhooksFor lists the endpoints of every app that asked for topic, by
// app and ID: the watched topics' work is for them only.
func (s *DB) WebhooksFor(ctx context.Context, topic string) ([]webhooks.Webhook, error) {
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT `+webhookColumns+` FROM webhooks WHERE `+topicMatch+` ORDER BY app_id, id`), topic)
	if err != nil {
		return nil, fmt.Errorf("list the webhooks of %s: %w", topic, err)
	}
	ws, err := sqldb.Collect(rows, s.scanWebhook)
	if err != nil {
		return nil, fmt.Errorf("list the webhooks of %s: %w", topic, err)
	}
	return ws, nil
}

// TellWebhook queues one message of topic for one endpoint about those
// of keys it was not told of yet (a gap group, a minute), and records
// them as told, in one transaction: of processes watching at once, one
// tells. payload makes the body from the keys not told before; nothing
// is queued when there are none. It answers how many there were.
func (s *DB) TellWebhook(ctx context.Context, app, webhook, topic string, keys []string, payload func(fresh []string) ([]byte, error)) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	var fresh []string
	err := s.db.InTx(ctx, "tell webhook", func(tx *sql.Tx) error {
		now := s.db.TimeArgs(s.db.Now(), false)[0]
		for _, k := range keys {
			// Guarded rather than refused by the foreign key: on
			// PostgreSQL a refusal would end the transaction.
			res, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO webhook_told (app_id, webhook_id, topic, key, told_at)
				SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE app_id = ? AND id = ?)
				ON CONFLICT (app_id, webhook_id, topic, key) DO NOTHING`), app, webhook, topic, k, now, app, webhook)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				fresh = append(fresh, k)
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		body, err := payload(fresh)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.db.Q(`INSERT INTO webhook_deliveries (app_id, webhook_id, topic, payload, created_at, queued_at, next_attempt_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`), app, webhook, topic, string(body), now, now, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("tell webhook %q of app %q of %s: %w", webhook, app, topic, err)
	}
	return len(fresh), nil
}
