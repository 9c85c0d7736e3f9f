package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migration is one step of the schema. Versions are applied in increasing
// order and never edited once released: a change is always a new migration.
type migration struct {
	version int
	name    string
	stmts   []string
}

// migrations returns the schema history. It is a function rather than a
// package variable so nothing can modify the list at run time.
func migrations() []migration {
	return []migration{
		{
			version: 1,
			name:    "organizations, apps and tokens",
			stmts: []string{
				`CREATE TABLE organizations (
					id         TEXT PRIMARY KEY,
					name       TEXT NOT NULL,
					created_at TEXT NOT NULL
				) STRICT`,
				// doc holds descriptive app fields added later, so they do not
				// each need a migration.
				`CREATE TABLE apps (
					id              TEXT PRIMARY KEY,
					organization_id TEXT NOT NULL REFERENCES organizations (id),
					name            TEXT NOT NULL,
					doc             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(doc)),
					created_at      TEXT NOT NULL,
					updated_at      TEXT NOT NULL,
					-- Parent key for tokens: an app token must name the app's
					-- own organization.
					UNIQUE (id, organization_id)
				) STRICT`,
				`CREATE INDEX apps_by_organization ON apps (organization_id, created_at, id)`,
				`CREATE TABLE tokens (
					id              TEXT PRIMARY KEY,
					hash            BLOB NOT NULL,
					organization_id TEXT NOT NULL REFERENCES organizations (id),
					app_id          TEXT,
					name            TEXT NOT NULL DEFAULT '',
					created_at      TEXT NOT NULL,
					revoked_at      TEXT,
					FOREIGN KEY (app_id, organization_id) REFERENCES apps (id, organization_id)
				) STRICT`,
				`CREATE INDEX tokens_by_organization ON tokens (organization_id, created_at, id)`,
				`CREATE INDEX tokens_by_app ON tokens (app_id, created_at, id) WHERE app_id IS NOT NULL`,
			},
		},
		{
			version: 2,
			name:    "content records, channel keys and app revisions",
			stmts: []string{
				// revision moves on every change of the app or its records,
				// so readers can tell when what they cached is stale.
				`ALTER TABLE apps ADD COLUMN revision INTEGER NOT NULL DEFAULT 0`,
				`CREATE TABLE channel_keys (
					key        TEXT PRIMARY KEY,
					app_id     TEXT NOT NULL REFERENCES apps (id),
					channel_id TEXT NOT NULL
				) STRICT`,
				`CREATE INDEX channel_keys_by_app ON channel_keys (app_id)`,
				// One table for every kind: each is a JSON document looked up
				// by app, kind and ID; location is pulled out for filters.
				`CREATE TABLE records (
					app_id     TEXT NOT NULL REFERENCES apps (id),
					kind       TEXT NOT NULL,
					id         TEXT NOT NULL,
					doc        TEXT NOT NULL CHECK (json_valid(doc)),
					location   TEXT,
					created_at TEXT NOT NULL,
					updated_at TEXT NOT NULL,
					PRIMARY KEY (app_id, kind, id)
				) STRICT`,
			},
		},
		{
			version: 3,
			name:    "token scopes",
			stmts: []string{
				// Tokens made before scopes keep what they could do; new
				// tokens are always written with their scopes.
				`ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'content:read,content:write,events:write'`,
			},
		},
		{
			version: 4,
			name:    "stored vectors",
			stmts: []string{
				// Sentence-embedding vectors of an app's content by content
				// hash, so that a restart or a new revision embeds only
				// what is new. vector is little-endian float32s. used_at
				// has a fixed width and comes before vector, so that
				// marking a row used rewrites it in place and leaves the
				// overflow pages of a long vector as they are. The rows
				// are a cache of the app's content and go with it.
				`CREATE TABLE vectors (
					app_id  TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					model   TEXT NOT NULL,
					hash    BLOB NOT NULL CHECK (length(hash) = 32),
					used_at TEXT NOT NULL,
					vector  BLOB NOT NULL,
					PRIMARY KEY (app_id, model, hash)
				) STRICT`,
			},
		},
	}
}

// latestVersion is the schema version this code expects.
func latestVersion() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`

// schemaVersion returns the highest applied migration, 0 for a new database.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (int, error) {
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

// migrate applies every migration the database lacks. Each runs in its own
// write transaction (BEGIN IMMEDIATE, from the DSN) and re-checks whether it
// was applied once it holds the lock, so two processes opening a new file at
// the same time apply each migration exactly once.
func (s *Store) migrate(ctx context.Context) error {
	current, err := schemaVersion(ctx, s.db)
	if err != nil {
		return err
	}
	if latest := latestVersion(); current > latest {
		return fmt.Errorf("database schema version %d is newer than this program supports (%d)", current, latest)
	}
	for _, m := range migrations() {
		if m.version <= current {
			continue
		}
		if err := s.apply(ctx, m); err != nil {
			return fmt.Errorf("apply migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, m migration) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var applied int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&applied); err != nil {
		return fmt.Errorf("check schema_migrations: %w", err)
	}
	if applied > 0 {
		// Another process got there first.
		return tx.Rollback()
	}
	for i, stmt := range m.stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, formatTime(time.Now())); err != nil {
		return fmt.Errorf("record version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
