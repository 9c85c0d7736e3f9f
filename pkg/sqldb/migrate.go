package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Migration is one step of the schema. Versions are applied in increasing
// order and never edited once released: a change is always a new
// migration. The two engines' histories have the same versions, so a
// version number means the same model in both. They are functions rather
// than package variables so that nothing can modify them at run time.
type Migration struct {
	Version int
	Name    string
	Stmts   []string
}

// Migrations is the engine's schema history, oldest first: what Open
// applies to a database that lacks them.
func Migrations(e Engine) []Migration {
	if e == Postgres {
		return postgresMigrations()
	}
	return sqliteMigrations()
}

// LatestVersion is the schema version this code expects.
func (db *DB) LatestVersion() int {
	ms := Migrations(db.engine)
	return ms[len(ms)-1].Version
}

func (db *DB) newer(current int) error {
	if latest := db.LatestVersion(); current > latest {
		return fmt.Errorf("database schema version %d is newer than this program supports (%d)", current, latest)
	}
	return nil
}

const sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`

// sqliteVersion returns the highest applied migration, 0 for a new file.
func sqliteVersion(ctx context.Context, q Querier) (int, error) {
	var exists int
	err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("look for schema_migrations table: %w", err)
	}
	if exists == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrateSQLite applies every migration the file lacks. Each runs in its
// own write transaction (BEGIN IMMEDIATE, from the DSN) and re-checks
// whether it was applied once it holds the lock, so two processes opening
// a new file at the same time apply each migration exactly once.
func (db *DB) migrateSQLite(ctx context.Context) error {
	current, err := sqliteVersion(ctx, db.sql)
	if err != nil {
		return err
	}
	if err := db.newer(current); err != nil {
		return err
	}
	for _, m := range sqliteMigrations() {
		if m.Version <= current {
			continue
		}
		err := db.InTx(ctx, "apply", func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, sqliteMigrationsTable); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
			var applied int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&applied); err != nil {
				return fmt.Errorf("check schema_migrations: %w", err)
			}
			if applied > 0 {
				return nil // another process got there first
			}
			for i, stmt := range m.Stmts {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("statement %d: %w", i+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				m.Version, FormatTime(time.Now())); err != nil {
				return fmt.Errorf("record version: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("apply migration %d (%s): %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// migrateLockKey is the advisory lock that serializes PostgreSQL schema
// migrations across processes. Advisory locks are per database, so the
// key only has to differ from the stores' other keys.
const migrateLockKey int64 = 0x636d_735f_6d69_6772 // "cms_migr"

const postgresMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// postgresVersion returns the highest applied migration, 0 for a new
// database.
func postgresVersion(ctx context.Context, q Querier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v)
	if pgCode(err) == undefinedTable {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migratePostgres applies every migration the database lacks, all in one
// transaction that first takes an advisory lock: replicas starting at
// once wait for each other, and the one after the first finds nothing left
// to do. PostgreSQL's DDL is transactional, so a failure leaves the schema
// as it was.
func (db *DB) migratePostgres(ctx context.Context) error {
	return db.InTx(ctx, "migrate", func(tx *sql.Tx) error {
		// Waiting for another replica's migrations, and the migrations
		// themselves, may take longer than the per-statement defaults
		// meant for requests; ctx bounds them instead.
		if _, err := tx.ExecContext(ctx, `SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', '0', true)`); err != nil {
			return fmt.Errorf("lift timeouts: %w", err)
		}
		if err := db.Exclusive(ctx, tx, migrateLockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, postgresMigrationsTable); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		current, err := postgresVersion(ctx, tx)
		if err != nil {
			return err
		}
		if err := db.newer(current); err != nil {
			return err
		}
		for _, m := range postgresMigrations() {
			if m.Version <= current {
				continue
			}
			for i, stmt := range m.Stmts {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("apply migration %d (%s): statement %d: %w", m.Version, m.Name, i+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %d: %w", m.Version, err)
			}
		}
		return nil
	})
}
