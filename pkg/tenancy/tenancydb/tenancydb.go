// Package tenancydb is the tenancy.Store of a SQL database (package
// sqldb): organizations, apps, their channel keys and tokens, the same
// code for SQLite and PostgreSQL. The content store builds on it; ingest
// uses it alone, to check tokens without the content model.
//
// Listings are ordered by creation time, then ID (byte order). ListApps
// with an empty organization ID lists every app. Filters naming records
// that do not exist match nothing rather than failing.
package tenancydb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Store implements tenancy.Store. It is safe for concurrent use, and
// several processes may use the same database.
type Store struct {
	db *sqldb.DB
	// owned says whether Close closes db.
	owned bool
	// Queries in the engine's form, built once.
	orgColumns, appColumns, tokenColumns, byCreation string
	// Prepared for the lookups made on every authenticated request, and
	// the audit entry of every write.
	appStmt, tokenStmt, auditStmt, moveAuditStmt *sqldb.Stmt
}

var _ tenancy.Store = (*Store)(nil)

// Open opens the database dsn names (see sqldb.Open) for a store that
// closes it on Close.
func Open(ctx context.Context, dsn string) (*Store, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s.owned = true
	return s, nil
}

// New returns the store of an open database; Close leaves db open.
func New(ctx context.Context, db *sqldb.DB) (*Store, error) {
	t := func(col string) string { return db.TimeColumns(col, true) }
	s := &Store{
		db:           db,
		orgColumns:   `id, name, ` + t("created_at"),
		appColumns:   `id, organization_id, name, doc, ` + t("created_at") + `, ` + t("updated_at"),
		tokenColumns: `id, hash, organization_id, app_id, scopes, name, ` + t("created_at") + `, ` + t("revoked_at"),
		byCreation:   ` ORDER BY ` + t("created_at") + `, id`,
	}
	var err error
	if s.appStmt, err = db.Prepare(ctx, `SELECT `+s.appColumns+` FROM apps WHERE id = ?`); err != nil {
		return nil, fmt.Errorf("prepare app lookup: %w", err)
	}
	if s.tokenStmt, err = db.Prepare(ctx, `SELECT `+s.tokenColumns+` FROM tokens WHERE id = ?`); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare token lookup: %w", err), s.appStmt.Close())
	}
	if s.auditStmt, err = db.Prepare(ctx, auditInsert); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare the audit entry: %w", err), s.appStmt.Close(), s.tokenStmt.Close())
	}
	if db.Engine() == sqldb.Postgres {
		// Text on PostgreSQL (see sqldb.Stmt): nothing to prepare.
		s.moveAuditStmt, _ = db.Prepare(ctx, moveAudit)
	}
	return s, nil
}

// DB is the store's database.
func (s *Store) DB() *sqldb.DB { return s.db }

// Ping reports whether the database can be read, for readiness checks.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// Close releases the prepared statements, and the database when Open
// opened it. Calling it again returns the first result.
func (s *Store) Close() error {
	err := errors.Join(s.appStmt.Close(), s.tokenStmt.Close(), s.auditStmt.Close())
	if s.moveAuditStmt != nil {
		err = errors.Join(err, s.moveAuditStmt.Close())
	}
	if s.owned {
		err = errors.Join(err, s.db.Close())
	}
	return err
}

// CreateOrganization implements tenancy.Store.
func (s *Store) CreateOrganization(ctx context.Context, org tenancy.Organization) error {
	if org.ID == "" {
		return errors.New("create organization: empty id")
	}
	err := s.db.InTx(ctx, fmt.Sprintf("create organization %q", org.ID), func(tx *sql.Tx) error {
		if _, err := s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: org.ID, Operation: "createOrganization", Subject: org.ID, Created: 1}); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx,
			s.db.Q(`INSERT INTO organizations (`+s.orgColumns+`) VALUES (?, ?, `+s.db.TimeMarks(true)+`)`),
			append([]any{org.ID, org.Name}, s.db.TimeArgs(org.CreatedAt, true)...)...)
		return err
	})
	switch {
	case sqldb.IsDuplicate(err):
		return fmt.Errorf("organization %q: %w", org.ID, tenancy.ErrConflict)
	case err != nil:
		return fmt.Errorf("create organization %q: %w", org.ID, err)
	}
	return nil
}

// Organization implements tenancy.Store.
func (s *Store) Organization(ctx context.Context, id string) (tenancy.Organization, error) {
	return s.OrganizationIn(ctx, s.db.SQL(), id)
}

// OrganizationIn is Organization read through q, a transaction of the
// store's database.
func (s *Store) OrganizationIn(ctx context.Context, q sqldb.Querier, id string) (tenancy.Organization, error) {
	org, err := s.scanOrganization(q.QueryRowContext(ctx, s.db.Q(`SELECT `+s.orgColumns+` FROM organizations WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.Organization{}, fmt.Errorf("organization %q: %w", id, tenancy.ErrNotFound)
	}
	if err != nil {
		return tenancy.Organization{}, fmt.Errorf("get organization %q: %w", id, err)
	}
	return org, nil
}

// ListOrganizations implements tenancy.Store.
func (s *Store) ListOrganizations(ctx context.Context) ([]tenancy.Organization, error) {
	return s.ListOrganizationsIn(ctx, s.db.SQL())
}

// ListOrganizationsIn is ListOrganizations read through q.
func (s *Store) ListOrganizationsIn(ctx context.Context, q sqldb.Querier) ([]tenancy.Organization, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+s.orgColumns+` FROM organizations`+s.byCreation)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	orgs, err := sqldb.Collect(rows, s.scanOrganization)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	return orgs, nil
}

// CreateApp implements tenancy.Store. The new app is announced as
// changed, for replicas that cached its absence.
func (s *Store) CreateApp(ctx context.Context, app tenancy.App) error {
	if app.ID == "" {
		return errors.New("create app: empty id")
	}
	args := append([]any{app.ID, app.OrganizationID, app.Name, sqldb.DocArg(app.Doc)},
		append(s.db.TimeArgs(app.CreatedAt, true), s.db.TimeArgs(app.UpdatedAt, true)...)...)
	err := s.db.InTx(ctx, fmt.Sprintf("create app %q", app.ID), func(tx *sql.Tx) error {
		if _, err := s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: app.OrganizationID, AppID: app.ID, Operation: "createApp", Subject: app.ID, Created: 1}); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO apps (`+s.appColumns+`) VALUES (?, ?, ?, `+s.db.DocMark()+`, `+
			s.db.TimeMarks(true)+`, `+s.db.TimeMarks(true)+`)`), args...)
		switch {
		case sqldb.IsDuplicate(err):
			// Also raised by UNIQUE (id, organization_id).
			return fmt.Errorf("app %q: %w", app.ID, tenancy.ErrConflict)
		case sqldb.IsForeignKey(err):
			return fmt.Errorf("create app %q: organization %q: %w", app.ID, app.OrganizationID, tenancy.ErrNotFound)
		case err != nil:
			return fmt.Errorf("create app %q: %w", app.ID, err)
		}
		return s.db.Notify(ctx, tx, app.ID)
	})
	return err
}

// App implements tenancy.Store.
func (s *Store) App(ctx context.Context, id string) (tenancy.App, error) {
	app, err := s.scanApp(s.appStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.App{}, fmt.Errorf("app %q: %w", id, tenancy.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, fmt.Errorf("get app %q: %w", id, err)
	}
	return app, nil
}

// ListApps implements tenancy.Store. An empty organizationID lists every
// app.
func (s *Store) ListApps(ctx context.Context, organizationID string) ([]tenancy.App, error) {
	return s.FindApps(ctx, s.db.SQL(), organizationID, "")
}

// FindApps lists, through q, the apps of the organization and with the ID
// given, each unless empty, in creation order.
func (s *Store) FindApps(ctx context.Context, q sqldb.Querier, organizationID, appID string) ([]tenancy.App, error) {
	var w sqldb.Where
	w.Add("organization_id", organizationID)
	w.Add("id", appID)
	rows, err := q.QueryContext(ctx, s.db.Q(`SELECT `+s.appColumns+` FROM apps`+w.String()+s.byCreation), w.Args...)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	apps, err := sqldb.Collect(rows, s.scanApp)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return apps, nil
}

// AppByChannelKey implements tenancy.Store, in one query: channel_keys
// and apps share no column name.
func (s *Store) AppByChannelKey(ctx context.Context, key string) (tenancy.App, string, error) {
	row := &withChannel{Scanner: s.db.SQL().QueryRowContext(ctx, s.db.Q(
		`SELECT `+s.appColumns+`, channel_id FROM channel_keys JOIN apps ON apps.id = channel_keys.app_id WHERE key = ?`), key)}
	app, err := s.scanApp(row)
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.App{}, "", fmt.Errorf("channel key %q: %w", key, tenancy.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, "", fmt.Errorf("look up channel key %q: %w", key, err)
	}
	return app, row.channelID, nil
}

// withChannel scans an app row followed by a channel ID.
type withChannel struct {
	sqldb.Scanner
	channelID string
}

func (r *withChannel) Scan(dest ...any) error { return r.Scanner.Scan(append(dest, &r.channelID)...) }

// CreateToken implements tenancy.Store. The schema's composite foreign key
// rejects an app token whose organization is not the app's.
func (s *Store) CreateToken(ctx context.Context, tok tenancy.Token) error {
	if tok.ID == "" {
		return errors.New("create token: empty id")
	}
	if len(tok.Hash) == 0 {
		return fmt.Errorf("create token %q: empty hash", tok.ID)
	}
	if err := tenancy.CheckTokenScopes(tok); err != nil {
		return fmt.Errorf("create token %q: %w", tok.ID, err)
	}
	args := append([]any{tok.ID, tok.Hash, tok.OrganizationID, sqldb.NullString(tok.AppID), tok.Scopes.String(), tok.Name},
		append(s.db.TimeArgs(tok.CreatedAt, true), s.db.NullTimeArgs(tok.RevokedAt, true)...)...)
	err := s.db.InTx(ctx, fmt.Sprintf("create token %q", tok.ID), func(tx *sql.Tx) error {
		if _, err := s.Audit(ctx, tx, tenancy.AuditEntry{OrganizationID: tok.OrganizationID, AppID: tok.AppID, Operation: "createToken", Subject: tok.ID, Created: 1}); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.db.Q(`INSERT INTO tokens (`+s.tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, `+
			s.db.TimeMarks(true)+`, `+s.db.TimeMarks(true)+`)`), args...)
		return err
	})
	switch {
	case sqldb.IsDuplicate(err):
		return fmt.Errorf("token %q: %w", tok.ID, tenancy.ErrConflict)
	case sqldb.IsForeignKey(err):
		return fmt.Errorf("create token %q: %w", tok.ID, tenancy.MissingOwner(ctx, s, tok))
	case err != nil:
		return fmt.Errorf("create token %q: %w", tok.ID, err)
	}
	return nil
}

// Token implements tenancy.Store.
func (s *Store) Token(ctx context.Context, id string) (tenancy.Token, error) {
	tok, err := s.scanToken(s.tokenStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.Token{}, fmt.Errorf("token %q: %w", id, tenancy.ErrNotFound)
	}
	if err != nil {
		return tenancy.Token{}, fmt.Errorf("get token %q: %w", id, err)
	}
	return tok, nil
}

// ListTokens implements tenancy.Store.
func (s *Store) ListTokens(ctx context.Context, f tenancy.TokenFilter) ([]tenancy.Token, error) {
	var w sqldb.Where
	w.Add("organization_id", f.OrganizationID)
	w.Add("app_id", f.AppID)
	rows, err := s.db.SQL().QueryContext(ctx, s.db.Q(`SELECT `+s.tokenColumns+` FROM tokens`+w.String()+s.byCreation), w.Args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	toks, err := sqldb.Collect(rows, s.scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

// RevokeToken implements tenancy.Store. The token's row is locked from
// the read to the write, so the first revocation stays; a concurrent
// revocation waits for it and then finds the token revoked. Revoking a
// revoked token is an operation that changed nothing.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke token %q: zero revocation time", id)
	}
	return s.db.InTx(ctx, fmt.Sprintf("revoke token %q", id), func(tx *sql.Tx) error {
		tok, err := s.scanToken(tx.QueryRowContext(ctx, s.db.Q(`SELECT `+s.tokenColumns+` FROM tokens WHERE id = ?`+s.db.Lock(" FOR UPDATE")), id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("token %q: %w", id, tenancy.ErrNotFound)
		case err != nil:
			return fmt.Errorf("revoke token %q: %w", id, err)
		}
		e := tenancy.AuditEntry{OrganizationID: tok.OrganizationID, AppID: tok.AppID, Operation: "revokeToken", Subject: id, Updated: 1}
		if tok.Revoked() {
			e.Updated, e.Unchanged = 0, 1
		}
		if _, err := s.Audit(ctx, tx, e); err != nil {
			return err
		}
		if tok.Revoked() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.db.Q(`UPDATE tokens SET `+s.db.SetTime("revoked_at", true)+` WHERE id = ?`),
			append(s.db.TimeArgs(at, true), id)...); err != nil {
			return fmt.Errorf("revoke token %q: %w", id, err)
		}
		return nil
	})
}

func (s *Store) scanOrganization(r sqldb.Scanner) (tenancy.Organization, error) {
	var org tenancy.Organization
	created := s.db.NewTime(true)
	if err := r.Scan(append([]any{&org.ID, &org.Name}, created.Dests()...)...); err != nil {
		return tenancy.Organization{}, err
	}
	var err error
	if org.CreatedAt, err = created.Value(); err != nil {
		return tenancy.Organization{}, fmt.Errorf("organization %q created_at: %w", org.ID, err)
	}
	return org, nil
}

func (s *Store) scanApp(r sqldb.Scanner) (tenancy.App, error) {
	var (
		app tenancy.App
		doc []byte
	)
	created, updated := s.db.NewTime(true), s.db.NewTime(true)
	dests := append([]any{&app.ID, &app.OrganizationID, &app.Name, &doc}, created.Dests()...)
	if err := r.Scan(append(dests, updated.Dests()...)...); err != nil {
		return tenancy.App{}, err
	}
	doc, err := s.db.ReadDoc(doc)
	if err != nil {
		return tenancy.App{}, fmt.Errorf("app %q doc: %w", app.ID, err)
	}
	if len(doc) > 0 && string(doc) != "{}" {
		app.Doc = doc
		app.Channels = tenancy.ChannelsOf(app.Doc)
	}
	if app.CreatedAt, err = created.Value(); err != nil {
		return tenancy.App{}, fmt.Errorf("app %q created_at: %w", app.ID, err)
	}
	if app.UpdatedAt, err = updated.Value(); err != nil {
		return tenancy.App{}, fmt.Errorf("app %q updated_at: %w", app.ID, err)
	}
	return app, nil
}

func (s *Store) scanToken(r sqldb.Scanner) (tenancy.Token, error) {
	var (
		tok    tenancy.Token
		appID  sql.NullString
		scopes string
	)
	created, revoked := s.db.NewTime(true), s.db.NewTime(true)
	dests := append([]any{&tok.ID, &tok.Hash, &tok.OrganizationID, &appID, &scopes, &tok.Name}, created.Dests()...)
	if err := r.Scan(append(dests, revoked.Dests()...)...); err != nil {
		return tenancy.Token{}, err
	}
	tok.AppID = appID.String
	tok.Scopes = tenancy.StoredScopes(scopes)
	var err error
	if tok.CreatedAt, err = created.Value(); err != nil {
		return tenancy.Token{}, fmt.Errorf("token %q created_at: %w", tok.ID, err)
	}
	if tok.RevokedAt, err = revoked.Value(); err != nil {
		return tenancy.Token{}, fmt.Errorf("token %q revoked_at: %w", tok.ID, err)
	}
	return tok, nil
}
