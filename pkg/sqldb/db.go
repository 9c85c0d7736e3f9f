// Package sqldb is the SQL database the stores of organizations, apps,
// tokens and content share: it opens SQLite (one file, for a single node)
// or PostgreSQL (shared by any number of replicas) through database/sql,
// brings the schema up to date, and holds what differs between the two
// engines, the dialect: placeholders, how times and documents are kept,
// error codes, row locks and change notifications. The stores above it
// are written once, for both.
//
// SQLite: one file, opened in WAL mode with foreign keys on; every
// transaction takes the write lock up front (BEGIN IMMEDIATE), so writers
// take turns and wait up to five seconds for each other. Times are UTC
// text with nine fractional digits, which sorts in time order.
//
// PostgreSQL: Open takes a pgx connection string (a postgres:// URL or
// key=value pairs) and honours its pool settings (pool_max_conns,
// pool_min_conns, pool_max_conn_lifetime, ...). Unless the DSN sets them,
// as a parameter or in options=-c..., every connection gets
// statement_timeout=5s and lock_timeout=3s, so that a request never waits
// on the database without bound and a write stuck behind another
// transaction's locks gives up with a lock timeout before its statement
// deadline. They are sent as connection parameters, which take precedence
// over ALTER ROLE or ALTER DATABASE ... SET: change them in the DSN. The
// role needs to create tables in its default schema the first time.
// Documents are jsonb, compared by value and read back in the canonical
// form the content package writes (compact, keys sorted, HTML characters
// unescaped); numbers keep their digits, but jsonb writes exponents out
// (1e3 reads back as 1000), and text cannot hold U+0000. timestamptz
// keeps microseconds: a time a caller sets has an _ns column with the
// nanoseconds past it, and times the store sets are to the microsecond.
// Every transaction that creates an app or moves its revision notifies
// the channel cms_app_revision with the app's ID (see WatchRevisions).
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Engine is a database engine.
type Engine int

// The engines.
const (
	SQLite Engine = iota + 1
	Postgres
)

func (e Engine) String() string {
	switch e {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "engine(" + strconv.Itoa(int(e)) + ")"
}

// DB is an open, migrated database. It is safe for concurrent use.
type DB struct {
	sql    *sql.DB
	engine Engine
	// name says which database in errors: a SQLite path, or
	// host:port/database for PostgreSQL (never its password).
	name string

	// PostgreSQL only: the pool behind sql, and the configuration of
	// WatchRevisions' own connections.
	pool   *pgxpool.Pool
	listen *pgx.ConnConfig

	// move is MoveRevision's statement on SQLite.
	move *Stmt

	closeOnce sync.Once
	closeErr  error
	// closed ends WatchRevisions when the database is closed.
	closed chan struct{}
}

// IsPostgres reports whether dsn names a PostgreSQL database: a URL, or
// libpq's keyword form ("host=db dbname=cms ...").
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || isKeywords(dsn)
}

func isKeywords(dsn string) bool {
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "host=") || strings.HasPrefix(f, "dbname=") {
			return true
		}
	}
	return false
}

// Open opens the database dsn names and brings its schema up to date: a
// postgres:// or postgresql:// URL (or libpq keywords) opens PostgreSQL,
// anything else is the path of a SQLite file, created if needed. Errors
// never repeat a PostgreSQL DSN, which may hold a password.
func Open(ctx context.Context, dsn string) (*DB, error) {
	if IsPostgres(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

// Describe names the database dsn names, for logs: a PostgreSQL URL
// without its user information and parameters, a SQLite path as it is.
func Describe(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	if isKeywords(dsn) {
		var kept []string
		for _, f := range strings.Fields(dsn) {
			if strings.HasPrefix(f, "host=") || strings.HasPrefix(f, "port=") || strings.HasPrefix(f, "dbname=") {
				kept = append(kept, f)
			}
		}
		return strings.Join(kept, " ")
	}
	rest := dsn[strings.Index(dsn, "://")+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q]
	}
	return "postgres://" + rest
}

// init checks the connection and migrates; on failure the caller closes.
func (db *DB) init(ctx context.Context) error {
	if err := db.sql.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	var err error
	if db.engine == Postgres {
		err = db.migratePostgres(ctx)
	} else {
		err = db.migrateSQLite(ctx)
	}
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	if db.engine == SQLite {
		if db.move, err = db.Prepare(ctx, `UPDATE apps SET revision = revision + 1 WHERE id = ? RETURNING revision, organization_id`); err != nil {
			return fmt.Errorf("prepare the revision move: %w", err)
		}
	}
	return nil
}

// SQL is the database handle.
func (db *DB) SQL() *sql.DB { return db.sql }

// Engine is the database's engine.
func (db *DB) Engine() Engine { return db.engine }

// Pool is the pgx pool behind a PostgreSQL database (nil for SQLite), for
// the few reads database/sql would slow down.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Ping reports whether the database can be read, for readiness checks.
func (db *DB) Ping(ctx context.Context) error {
	if _, err := db.SchemaVersion(ctx); err != nil {
		return fmt.Errorf("ping content database %s: %w", db.name, err)
	}
	return nil
}

// SchemaVersion returns the highest schema migration applied.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	if db.engine == Postgres {
		return postgresVersion(ctx, db.sql)
	}
	return sqliteVersion(ctx, db.sql)
}

// Close releases the database, waiting for connections in use, and ends
// WatchRevisions. Calling it again returns the first result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		close(db.closed)
		if db.move != nil {
			_ = db.move.Close()
		}
		err := db.sql.Close()
		if db.pool != nil {
			db.pool.Close()
		}
		if err != nil {
			db.closeErr = fmt.Errorf("close content database: %w", err)
		}
	})
	return db.closeErr
}

// Querier is what both the database and a transaction offer, so that
// reads can run in either.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// InTx runs fn in a transaction and commits it; an error from fn rolls it
// back. what says what failed in errors.
func (db *DB) InTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// InSnapshot runs fn on a consistent view of the database: a read-only
// repeatable-read transaction on PostgreSQL. On SQLite, whose every
// transaction takes the write lock, fn reads the database directly.
func (db *DB) InSnapshot(ctx context.Context, fn func(q Querier) error) (err error) {
	if db.engine != Postgres {
		return fn(db.sql)
	}
	tx, err := db.sql.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Nothing was written; rolling back ends the snapshot.
	defer func() { err = errors.Join(err, ignoreDone(tx.Rollback())) }()
	return fn(tx)
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// Collect reads every row with scan and closes rows.
func Collect[T any](rows *sql.Rows, scan func(Scanner) (T, error)) ([]T, error) {
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

// Scanner is a row, or rows at one row.
type Scanner interface{ Scan(dest ...any) error }

// NullString is NULL for an empty string.
func NullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Where builds a WHERE clause of equalities on the columns given a
// non-empty value.
type Where struct {
	conds []string
	Args  []any
}

// Add requires column = value, unless value is empty.
func (w *Where) Add(column, value string) {
	if value == "" {
		return
	}
	w.Args = append(w.Args, value)
	w.conds = append(w.conds, column+" = ?")
}

func (w *Where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(w.conds, ` AND `)
}

// Marks returns n comma-separated placeholders.
func Marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// timeLayout is RFC 3339 in UTC with a fixed nine-digit fraction, as
// SQLite keeps times. Unlike time.RFC3339Nano it never drops trailing
// zeros, so the text sorts in time order; time.RFC3339Nano parses it.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// FormatTime is t as SQLite keeps it.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// Stmt is a query run on most requests. On SQLite it is prepared once. On
// PostgreSQL it stays text: database/sql keeps no idle connection of
// pgx's pool, so a prepared statement would be prepared and deallocated
// again on each use, while pgx caches the text's plan on each connection.
type Stmt struct {
	db    *DB
	stmt  *sql.Stmt
	query string
}

// Prepare returns query, written with ? placeholders, ready to run often.
func (db *DB) Prepare(ctx context.Context, query string) (*Stmt, error) {
	s := &Stmt{db: db, query: db.Q(query)}
	if db.engine == SQLite {
		var err error
		if s.stmt, err = db.sql.PrepareContext(ctx, s.query); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// QueryRowContext runs the statement for one row.
func (s *Stmt) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	if s.stmt != nil {
		return s.stmt.QueryRowContext(ctx, args...)
	}
	return s.db.sql.QueryRowContext(ctx, s.query, args...)
}

// QueryRowIn runs the statement in tx for one row.
func (s *Stmt) QueryRowIn(ctx context.Context, tx *sql.Tx, args ...any) *sql.Row {
	if s.stmt != nil {
		// Prepared once on each of the pool's connections, then reused.
		return tx.StmtContext(ctx, s.stmt).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, s.query, args...)
}

// ExecIn runs the statement in tx.
func (s *Stmt) ExecIn(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	if s.stmt != nil {
		return tx.StmtContext(ctx, s.stmt).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, s.query, args...)
}

// Close releases the statement.
func (s *Stmt) Close() error {
	if s.stmt != nil {
		return s.stmt.Close()
	}
	return nil
}
