// Package sqlite is the content.Store backed by one SQLite database file,
// shared by the api and ingest processes on the same host.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// busyTimeoutMillis is how long a statement waits for another connection or
// process holding the write lock before failing with SQLITE_BUSY.
const busyTimeoutMillis = 5000

// maxConns bounds the pool of connections to the file.
const maxConns = 8

// Store implements content.Store. It is safe for concurrent use, and several
// processes may open the same file.
//
// Listings are ordered by creation time, then ID. ListApps with an empty
// organization ID lists every app. Filters naming records that do not exist
// match nothing rather than failing.
type Store struct {
	db        *sql.DB
	closeOnce sync.Once
	closeErr  error

	// Prepared for the hot lookups made on every authenticated request.
	appStmt      *sql.Stmt
	tokenStmt    *sql.Stmt
	recordStmt   *sql.Stmt
	revisionStmt *sql.Stmt
}

var _ content.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and brings its
// schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open content database: empty path")
	}
	base, err := sqlitedrv.NewConnector(dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open content database %s: %w", path, err)
	}
	db := sql.OpenDB(busyRetryConnector{base})
	// Writers take turns on the file anyway; a bounded pool that stays open
	// avoids re-running the DSN pragmas, which take file locks, per burst.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db}
	if err := s.init(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open content database %s: %w", path, err), db.Close())
	}
	return s, nil
}

// dsn builds a URI filename. Pragmas go in the DSN so that every connection
// the pool opens gets them, not only the first. _txlock=immediate makes every
// transaction take the write lock up front, so concurrent writers wait on
// busy_timeout instead of failing when upgrading a read lock.
func dsn(path string) string {
	// Characters meaningful in a URI filename must be escaped in the path.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate",
		escaped, busyTimeoutMillis)
}

// busyRetryConnector retries opening a connection that fails with
// SQLITE_BUSY. SQLite returns BUSY without consulting busy_timeout in some
// lock states, notably while another process is switching a new file to WAL
// or recovering its WAL, and the DSN pragmas run at connection open.
type busyRetryConnector struct{ driver.Connector }

func (c busyRetryConnector) Connect(ctx context.Context) (driver.Conn, error) {
	deadline := time.Now().Add(busyTimeoutMillis * time.Millisecond)
	delay := time.Millisecond
	for {
		conn, err := c.Connector.Connect(ctx)
		if !isBusy(err) || time.Now().After(deadline) {
			return conn, err
		}
		// Jitter keeps processes that collided from retrying in step.
		wait := delay/2 + rand.N(delay)
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func isBusy(err error) bool {
	var e *sqlitedrv.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

func (s *Store) init(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	var err error
	s.appStmt, err = s.db.PrepareContext(ctx, `SELECT `+appColumns+` FROM apps WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("prepare app lookup: %w", err)
	}
	s.tokenStmt, err = s.db.PrepareContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("prepare token lookup: %w", err)
	}
	s.recordStmt, err = s.db.PrepareContext(ctx, `SELECT `+recordColumns+` FROM records WHERE app_id = ? AND kind = ? AND id = ?`)
	if err != nil {
		return fmt.Errorf("prepare record lookup: %w", err)
	}
	s.revisionStmt, err = s.db.PrepareContext(ctx, `SELECT revision FROM apps WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("prepare revision lookup: %w", err)
	}
	return nil
}

// Ping reports whether the database can be read, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := schemaVersion(ctx, s.db); err != nil {
		return fmt.Errorf("ping content database: %w", err)
	}
	return nil
}

// SchemaVersion returns the highest schema migration applied to the file.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.db)
}

// Close releases the database. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, st := range []*sql.Stmt{s.appStmt, s.tokenStmt, s.recordStmt, s.revisionStmt} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		errs = append(errs, s.db.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("close content database: %w", err)
		}
	})
	return s.closeErr
}

// CreateOrganization implements content.Store.
func (s *Store) CreateOrganization(ctx context.Context, org tenancy.Organization) error {
	if org.ID == "" {
		return errors.New("create organization: empty id")
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`,
		org.ID, org.Name, formatTime(org.CreatedAt))
	if isDuplicate(err) {
		return fmt.Errorf("organization %q: %w", org.ID, content.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create organization %q: %w", org.ID, err)
	}
	return nil
}

// Organization implements content.Store.
func (s *Store) Organization(ctx context.Context, id string) (tenancy.Organization, error) {
	row := s.db.QueryRowContext(ctx, `SELECT id, name, created_at FROM organizations WHERE id = ?`, id)
	org, err := scanOrganization(row)
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.Organization{}, fmt.Errorf("organization %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.Organization{}, fmt.Errorf("get organization %q: %w", id, err)
	}
	return org, nil
}

// ListOrganizations implements content.Store.
func (s *Store) ListOrganizations(ctx context.Context) ([]tenancy.Organization, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created_at FROM organizations ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	orgs, err := collect(rows, scanOrganization)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	return orgs, nil
}

const appColumns = `id, organization_id, name, doc, created_at, updated_at`

// CreateApp implements content.Store.
func (s *Store) CreateApp(ctx context.Context, app tenancy.App) error {
	if app.ID == "" {
		return errors.New("create app: empty id")
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO apps (id, organization_id, name, doc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		app.ID, app.OrganizationID, app.Name, docText(app.Doc), formatTime(app.CreatedAt), formatTime(app.UpdatedAt))
	switch {
	case isDuplicate(err):
		return fmt.Errorf("app %q: %w", app.ID, content.ErrConflict)
	case isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY):
		return fmt.Errorf("create app %q: organization %q: %w", app.ID, app.OrganizationID, content.ErrNotFound)
	case err != nil:
		return fmt.Errorf("create app %q: %w", app.ID, err)
	}
	return nil
}

// App implements content.Store.
func (s *Store) App(ctx context.Context, id string) (tenancy.App, error) {
	app, err := scanApp(s.appStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.App{}, fmt.Errorf("app %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, fmt.Errorf("get app %q: %w", id, err)
	}
	return app, nil
}

// ListApps implements content.Store. An empty organizationID lists every app.
func (s *Store) ListApps(ctx context.Context, organizationID string) ([]tenancy.App, error) {
	q := `SELECT ` + appColumns + ` FROM apps`
	var args []any
	if organizationID != "" {
		q += ` WHERE organization_id = ?`
		args = append(args, organizationID)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	apps, err := collect(rows, scanApp)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return apps, nil
}

const tokenColumns = `id, hash, organization_id, app_id, scopes, name, created_at, revoked_at`

// CreateToken implements content.Store. The schema's composite foreign key
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
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO tokens (id, hash, organization_id, app_id, scopes, name, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, tok.Hash, tok.OrganizationID, nullString(tok.AppID), tok.Scopes.String(), tok.Name,
		formatTime(tok.CreatedAt), nullTime(tok.RevokedAt))
	switch {
	case isDuplicate(err):
		return fmt.Errorf("token %q: %w", tok.ID, content.ErrConflict)
	case isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY):
		return fmt.Errorf("create token %q: %w", tok.ID, tenancy.MissingOwner(ctx, s, tok))
	case err != nil:
		return fmt.Errorf("create token %q: %w", tok.ID, err)
	}
	return nil
}

// Token implements content.Store.
func (s *Store) Token(ctx context.Context, id string) (tenancy.Token, error) {
	tok, err := scanToken(s.tokenStmt.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenancy.Token{}, fmt.Errorf("token %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.Token{}, fmt.Errorf("get token %q: %w", id, err)
	}
	return tok, nil
}

// ListTokens implements content.Store.
func (s *Store) ListTokens(ctx context.Context, f tenancy.TokenFilter) ([]tenancy.Token, error) {
	var (
		where []string
		args  []any
	)
	if f.OrganizationID != "" {
		where = append(where, `organization_id = ?`)
		args = append(args, f.OrganizationID)
	}
	if f.AppID != "" {
		where = append(where, `app_id = ?`)
		args = append(args, f.AppID)
	}
	q := `SELECT ` + tokenColumns + ` FROM tokens`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	toks, err := collect(rows, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

// RevokeToken implements content.Store.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke token %q: zero revocation time", id)
	}
	// COALESCE keeps the first revocation; SQLite counts the row as changed
	// either way, so zero rows means the token does not exist.
	res, err := s.db.ExecContext(ctx,
		`UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, formatTime(at), id)
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("token %q: %w", id, content.ErrNotFound)
	}
	return nil
}

// isDuplicate reports whether err is a uniqueness violation. For apps the
// UNIQUE (id, organization_id) key can fire before the primary key does.
func isDuplicate(err error) bool {
	return isConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) || isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE)
}

// isConstraint reports whether err is the SQLite extended result code.
func isConstraint(err error, code int) bool {
	var e *sqlitedrv.Error
	return errors.As(err, &e) && e.Code() == code
}

type scanner interface{ Scan(dest ...any) error }

func scanOrganization(r scanner) (tenancy.Organization, error) {
	var (
		org     tenancy.Organization
		created string
	)
	if err := r.Scan(&org.ID, &org.Name, &created); err != nil {
		return tenancy.Organization{}, err
	}
	var err error
	if org.CreatedAt, err = parseTime(created); err != nil {
		return tenancy.Organization{}, fmt.Errorf("organization %q created_at: %w", org.ID, err)
	}
	return org, nil
}

func scanApp(r scanner) (tenancy.App, error) {
	var (
		app                   tenancy.App
		doc, created, updated string
	)
	if err := r.Scan(&app.ID, &app.OrganizationID, &app.Name, &doc, &created, &updated); err != nil {
		return tenancy.App{}, err
	}
	if doc != "" && doc != "{}" {
		app.Doc = []byte(doc)
		app.Channels = content.ChannelsOf(app.Doc)
	}
	var err error
	if app.CreatedAt, err = parseTime(created); err != nil {
		return tenancy.App{}, fmt.Errorf("app %q created_at: %w", app.ID, err)
	}
	if app.UpdatedAt, err = parseTime(updated); err != nil {
		return tenancy.App{}, fmt.Errorf("app %q updated_at: %w", app.ID, err)
	}
	return app, nil
}

func scanToken(r scanner) (tenancy.Token, error) {
	var (
		tok     tenancy.Token
		appID   sql.NullString
		scopes  string
		created string
		revoked sql.NullString
	)
	if err := r.Scan(&tok.ID, &tok.Hash, &tok.OrganizationID, &appID, &scopes, &tok.Name, &created, &revoked); err != nil {
		return tenancy.Token{}, err
	}
	tok.AppID = appID.String
	tok.Scopes = tenancy.StoredScopes(scopes)
	var err error
	if tok.CreatedAt, err = parseTime(created); err != nil {
		return tenancy.Token{}, fmt.Errorf("token %q created_at: %w", tok.ID, err)
	}
	if revoked.Valid {
		if tok.RevokedAt, err = parseTime(revoked.String); err != nil {
			return tenancy.Token{}, fmt.Errorf("token %q revoked_at: %w", tok.ID, err)
		}
	}
	return tok, nil
}

func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// timeLayout is RFC 3339 in UTC with a fixed nine-digit fraction. Unlike
// time.RFC3339Nano it never drops trailing zeros, so the text sorts in time
// order and ORDER BY created_at is correct; time.RFC3339Nano parses it.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

func nullTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(t), Valid: true}
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

func docText(doc []byte) string {
	if len(doc) == 0 {
		return "{}"
	}
	return string(doc)
}
