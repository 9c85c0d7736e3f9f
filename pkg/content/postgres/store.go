// Package postgres is the content.Store backed by a PostgreSQL database,
// which any number of api and ingest replicas share.
//
// Open takes a pgx connection string (a postgres:// URL or key=value
// pairs) and honours its pool settings (pool_max_conns, pool_min_conns,
// pool_max_conn_lifetime, pool_max_conn_idle_time, ...). Unless the DSN
// sets them, as a parameter or in options=-c..., every connection gets
// statement_timeout=5s and lock_timeout=3s, so that a request never waits
// on the database without bound and a write stuck behind another
// transaction's locks gives up with a lock timeout before its statement
// deadline. They are sent as connection parameters, which take precedence
// over ALTER ROLE or ALTER DATABASE ... SET: change them in the DSN.
//
// Open brings the schema up to date (see migrations.go); the role needs to
// create tables in its default schema the first time.
//
// Documents are jsonb, compared by value (an import of the same document
// with its keys in another order changes nothing) and returned in the
// canonical form the content package writes: compact, keys sorted, HTML
// characters unescaped. Numbers keep their digits (2.50 stays 2.50), but
// jsonb writes exponents out: 1e3 reads back as 1000. PostgreSQL text
// cannot hold NUL, so neither documents nor names may contain U+0000.
//
// Times are kept to the nanosecond, as the content.Store contract asks:
// timestamptz holds the microseconds and a smallint column the rest.
//
// Every write that creates an app or moves its revision also sends a
// notification on the channel cms_app_revision with the app's ID, which
// PostgreSQL delivers when the transaction commits; WatchRevisions
// receives them, so that replicas can drop what they cached.
package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Connection parameters set unless the DSN sets them; see the package
// comment.
const (
	defaultStatementTimeout = "5s"
	defaultLockTimeout      = "3s"
)

// revisionChannel is the LISTEN/NOTIFY channel of app changes; the payload
// is the app ID.
const revisionChannel = "cms_app_revision"

// SQLSTATEs the store maps to content errors.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// Store implements content.Store. It is safe for concurrent use, and
// several processes may open the same database.
//
// Listings are ordered by creation time, then ID (byte order). ListApps
// with an empty organization ID lists every app. Filters naming records
// that do not exist match nothing rather than failing.
type Store struct {
	pool *pgxpool.Pool
	// listen configures WatchRevisions' own connections.
	listen *pgx.ConnConfig
	// name says which database in errors: host:port/database, no password.
	name string

	closeOnce sync.Once
	// closed ends WatchRevisions when the store is closed.
	closed chan struct{}
}

var _ content.Store = (*Store)(nil)

// Open connects to the database at dsn and brings its schema up to date.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open content database: %w", parseError(err))
	}
	name := describe(cfg.ConnConfig)
	setDefault(cfg.ConnConfig, "statement_timeout", defaultStatementTimeout)
	setDefault(cfg.ConnConfig, "lock_timeout", defaultLockTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open content database %s: %w", name, err)
	}
	s := &Store{pool: pool, listen: cfg.ConnConfig.Copy(), name: name, closed: make(chan struct{})}
	if err := s.init(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open content database %s: %w", name, err)
	}
	return s, nil
}

// parseError keeps the reason of pgx's parse error and leaves out the
// connection string it quotes, whose password pgx hides only on a best
// effort basis.
func parseError(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+len("`: "):]
	}
	return errors.New("cannot parse the DSN: " + msg)
}

// setDefault sets a run-time parameter on every connection unless the DSN
// already does, directly or through options.
func setDefault(cc *pgx.ConnConfig, name, value string) {
	if _, ok := cc.RuntimeParams[name]; ok {
		return
	}
	if strings.Contains(cc.RuntimeParams["options"], name) {
		return
	}
	cc.RuntimeParams[name] = value
}

func describe(cc *pgx.ConnConfig) string {
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
}

func (s *Store) init(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}

// Ping reports whether the database can be read, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := schemaVersion(ctx, s.pool); err != nil {
		return fmt.Errorf("ping content database %s: %w", s.name, err)
	}
	return nil
}

// SchemaVersion returns the highest schema migration applied to the
// database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.pool)
}

// Close closes the pool, waiting for connections in use, and ends
// WatchRevisions. Calling it again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.pool.Close()
	})
	return nil
}

// querier is what both the pool and a transaction offer, so that reads can
// run in either.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateOrganization implements content.Store.
func (s *Store) CreateOrganization(ctx context.Context, org tenancy.Organization) error {
	if org.ID == "" {
		return errors.New("create organization: empty id")
	}
	created, createdNS := splitTime(org.CreatedAt)
	_, err := s.pool.Exec(ctx,
		`INSERT INTO organizations (id, name, created_at, created_at_ns) VALUES ($1, $2, $3, $4)`,
		org.ID, org.Name, created, createdNS)
	switch {
	case err == nil:
		return nil
	case pgErrorCode(err) == uniqueViolation:
		return fmt.Errorf("organization %q: %w", org.ID, content.ErrConflict)
	}
	return fmt.Errorf("create organization %q: %w", org.ID, err)
}

const organizationColumns = `id, name, created_at, created_at_ns`

// Organization implements content.Store.
func (s *Store) Organization(ctx context.Context, id string) (tenancy.Organization, error) {
	return organization(ctx, s.pool, id)
}

func organization(ctx context.Context, q querier, id string) (tenancy.Organization, error) {
	org, err := scanOrganization(q.QueryRow(ctx, `SELECT `+organizationColumns+` FROM organizations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.Organization{}, fmt.Errorf("organization %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.Organization{}, fmt.Errorf("get organization %q: %w", id, err)
	}
	return org, nil
}

// ListOrganizations implements content.Store.
func (s *Store) ListOrganizations(ctx context.Context) ([]tenancy.Organization, error) {
	return listOrganizations(ctx, s.pool)
}

func listOrganizations(ctx context.Context, q querier) ([]tenancy.Organization, error) {
	orgs, err := query(ctx, q, scanOrganization, `SELECT `+organizationColumns+` FROM organizations ORDER BY created_at, created_at_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	return orgs, nil
}

const appColumns = `id, organization_id, name, doc, created_at, created_at_ns, updated_at, updated_at_ns`

// CreateApp implements content.Store. The new app is announced on the
// revision channel, for replicas that cached its absence.
func (s *Store) CreateApp(ctx context.Context, app tenancy.App) error {
	if app.ID == "" {
		return errors.New("create app: empty id")
	}
	created, createdNS := splitTime(app.CreatedAt)
	updated, updatedNS := splitTime(app.UpdatedAt)
	_, err := s.pool.Exec(ctx,
		`WITH ins AS (
			INSERT INTO apps (id, organization_id, name, doc, created_at, created_at_ns, updated_at, updated_at_ns)
			VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8) RETURNING id
		) SELECT pg_notify($9, id) FROM ins`,
		app.ID, app.OrganizationID, app.Name, docText(app.Doc), created, createdNS, updated, updatedNS, revisionChannel)
	if err == nil {
		return nil
	}
	switch pgErrorCode(err) {
	case uniqueViolation:
		// Also raised by UNIQUE (id, organization_id).
		return fmt.Errorf("app %q: %w", app.ID, content.ErrConflict)
	case foreignKeyViolation:
		return fmt.Errorf("create app %q: organization %q: %w", app.ID, app.OrganizationID, content.ErrNotFound)
	}
	return fmt.Errorf("create app %q: %w", app.ID, err)
}

// App implements content.Store.
func (s *Store) App(ctx context.Context, id string) (tenancy.App, error) {
	app, err := scanApp(s.pool.QueryRow(ctx, `SELECT `+appColumns+` FROM apps WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.App{}, fmt.Errorf("app %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.App{}, fmt.Errorf("get app %q: %w", id, err)
	}
	return app, nil
}

// ListApps implements content.Store. An empty organizationID lists every app.
func (s *Store) ListApps(ctx context.Context, organizationID string) ([]tenancy.App, error) {
	apps, err := listApps(ctx, s.pool, content.ExportFilter{OrganizationID: organizationID})
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return apps, nil
}

// listApps lists the apps matching f, in creation order.
func listApps(ctx context.Context, q querier, f content.ExportFilter) ([]tenancy.App, error) {
	w := where{}
	w.add("organization_id", f.OrganizationID)
	w.add("id", f.AppID)
	return query(ctx, q, scanApp, `SELECT `+appColumns+` FROM apps`+w.String()+` ORDER BY created_at, created_at_ns, id`, w.args...)
}

// where builds a WHERE clause of equalities on the columns given a
// non-empty value.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(column, value string) {
	if value == "" {
		return
	}
	w.args = append(w.args, value)
	w.conds = append(w.conds, fmt.Sprintf("%s = $%d", column, len(w.args)))
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(w.conds, ` AND `)
}

const tokenColumns = `id, hash, organization_id, app_id, scopes, name, created_at, created_at_ns, revoked_at, revoked_at_ns`

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
	created, createdNS := splitTime(tok.CreatedAt)
	var revoked *time.Time
	var revokedNS int16
	if !tok.RevokedAt.IsZero() {
		r, ns := splitTime(tok.RevokedAt)
		revoked, revokedNS = &r, ns
	}
	_, err := s.pool.Exec(ctx,
		`INSERT INTO tokens (id, hash, organization_id, app_id, scopes, name, created_at, created_at_ns, revoked_at, revoked_at_ns)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		tok.ID, tok.Hash, tok.OrganizationID, nullString(tok.AppID), tok.Scopes.String(), tok.Name, created, createdNS, revoked, revokedNS)
	if err == nil {
		return nil
	}
	switch pgErrorCode(err) {
	case uniqueViolation:
		return fmt.Errorf("token %q: %w", tok.ID, content.ErrConflict)
	case foreignKeyViolation:
		return fmt.Errorf("create token %q: %w", tok.ID, tenancy.MissingOwner(ctx, s, tok))
	}
	return fmt.Errorf("create token %q: %w", tok.ID, err)
}

// Token implements content.Store.
func (s *Store) Token(ctx context.Context, id string) (tenancy.Token, error) {
	tok, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.Token{}, fmt.Errorf("token %q: %w", id, content.ErrNotFound)
	}
	if err != nil {
		return tenancy.Token{}, fmt.Errorf("get token %q: %w", id, err)
	}
	return tok, nil
}

// ListTokens implements content.Store.
func (s *Store) ListTokens(ctx context.Context, f tenancy.TokenFilter) ([]tenancy.Token, error) {
	w := where{}
	w.add("organization_id", f.OrganizationID)
	w.add("app_id", f.AppID)
	toks, err := query(ctx, s.pool, scanToken, `SELECT `+tokenColumns+` FROM tokens`+w.String()+` ORDER BY created_at, created_at_ns, id`, w.args...)
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
	revoked, revokedNS := splitTime(at)
	// SET sees the row as it was, so both columns keep the first
	// revocation; a concurrent revocation waits for the row lock and then
	// sees this one. The row counts as updated either way, so zero rows
	// means the token does not exist.
	tag, err := s.pool.Exec(ctx,
		`UPDATE tokens SET revoked_at = COALESCE(revoked_at, $2),
		        revoked_at_ns = CASE WHEN revoked_at IS NULL THEN $3 ELSE revoked_at_ns END
		 WHERE id = $1`, id, revoked, revokedNS)
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("token %q: %w", id, content.ErrNotFound)
	}
	return nil
}

func scanOrganization(r pgx.Row) (tenancy.Organization, error) {
	var (
		org       tenancy.Organization
		created   time.Time
		createdNS int16
	)
	if err := r.Scan(&org.ID, &org.Name, &created, &createdNS); err != nil {
		return tenancy.Organization{}, err
	}
	org.CreatedAt = joinTime(created, createdNS)
	return org, nil
}

func scanApp(r pgx.Row) (tenancy.App, error) {
	var (
		app                  tenancy.App
		doc                  []byte
		created, updated     time.Time
		createdNS, updatedNS int16
	)
	if err := r.Scan(&app.ID, &app.OrganizationID, &app.Name, &doc, &created, &createdNS, &updated, &updatedNS); err != nil {
		return tenancy.App{}, err
	}
	doc, err := canonicalDoc(doc)
	if err != nil {
		return tenancy.App{}, fmt.Errorf("app %q doc: %w", app.ID, err)
	}
	if string(doc) != "{}" {
		app.Doc = doc
		app.Channels = content.ChannelsOf(app.Doc)
	}
	app.CreatedAt, app.UpdatedAt = joinTime(created, createdNS), joinTime(updated, updatedNS)
	return app, nil
}

func scanToken(r pgx.Row) (tenancy.Token, error) {
	var (
		tok                  tenancy.Token
		appID                *string
		scopes               string
		created              time.Time
		revoked              *time.Time
		createdNS, revokedNS int16
	)
	if err := r.Scan(&tok.ID, &tok.Hash, &tok.OrganizationID, &appID, &scopes, &tok.Name, &created, &createdNS, &revoked, &revokedNS); err != nil {
		return tenancy.Token{}, err
	}
	tok.Scopes = tenancy.StoredScopes(scopes)
	if appID != nil {
		tok.AppID = *appID
	}
	tok.CreatedAt = joinTime(created, createdNS)
	if revoked != nil {
		tok.RevokedAt = joinTime(*revoked, revokedNS)
	}
	return tok, nil
}

// query runs a query and reads every row with scan.
func query[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.AppendRows([]T(nil), rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
}

// splitTime splits t, in UTC, into what timestamptz keeps (microseconds)
// and the nanoseconds past it. Truncate rounds down, also before 1970, so
// the pair orders as t does.
func splitTime(t time.Time) (time.Time, int16) {
	t = t.UTC()
	us := t.Truncate(time.Microsecond)
	return us, int16(t.Sub(us))
}

// joinTime is the inverse of splitTime, in UTC.
func joinTime(t time.Time, ns int16) time.Time {
	return t.UTC().Add(time.Duration(ns))
}

// now is the time the store sets on records: timestamptz keeps
// microseconds, so what a write returns is what a read gives back.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// nullString is NULL for an empty string.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// docText is a document as the text given to a $n::jsonb parameter. Text
// and a cast, rather than []byte, work in every query mode pgx offers: in
// some a []byte goes as bytea.
func docText(doc []byte) string {
	if len(doc) == 0 {
		return "{}"
	}
	return string(doc)
}

// canonicalDoc turns jsonb's text (keys ordered by length, spaces after
// separators) into the form the content package writes, so that a document
// reads back as it was written.
func canonicalDoc(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their digits
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ignoreClosed drops the error of rolling back a transaction that already
// ended.
func ignoreClosed(err error) error {
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}
