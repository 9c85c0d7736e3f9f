package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// migration is one step of the schema. Versions are applied in increasing
// order and never edited once released: a change is always a new migration.
// The versions match the SQLite backend's, so a version number means the
// same content model in both.
type migration struct {
	version int
	name    string
	stmts   []string
}

// migrations returns the schema history. It is a function rather than a
// package variable so nothing can modify the list at run time.
//
// Identifiers are COLLATE "C" so that listings order them by bytes, as the
// SQLite backend does, whatever the database's locale. timestamptz keeps
// microseconds; callers give times to the nanosecond, so each time a
// caller sets has an _ns column with the nanoseconds past the microsecond
// (records' times are set by the store, to the microsecond).
func migrations() []migration {
	return []migration{
		{
			version: 1,
			name:    "organizations, apps and tokens",
			stmts: []string{
				`CREATE TABLE organizations (
					id            text COLLATE "C" PRIMARY KEY,
					name          text NOT NULL,
					created_at    timestamptz NOT NULL,
					created_at_ns smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999)
				)`,
				// doc holds descriptive app fields added later, so they do not
				// each need a migration.
				`CREATE TABLE apps (
					id              text COLLATE "C" PRIMARY KEY,
					organization_id text COLLATE "C" NOT NULL REFERENCES organizations (id),
					name            text NOT NULL,
					doc             jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(doc) = 'object'),
					created_at      timestamptz NOT NULL,
					created_at_ns   smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999),
					updated_at      timestamptz NOT NULL,
					updated_at_ns   smallint NOT NULL DEFAULT 0 CHECK (updated_at_ns BETWEEN 0 AND 999),
					-- Parent key for tokens: an app token must name the app's
					-- own organization.
					UNIQUE (id, organization_id)
				)`,
				`CREATE INDEX apps_by_organization ON apps (organization_id, created_at, created_at_ns, id)`,
				`CREATE TABLE tokens (
					id              text COLLATE "C" PRIMARY KEY,
					hash            bytea NOT NULL,
					organization_id text COLLATE "C" NOT NULL REFERENCES organizations (id),
					app_id          text COLLATE "C",
					name            text NOT NULL DEFAULT '',
					created_at      timestamptz NOT NULL,
					created_at_ns   smallint NOT NULL DEFAULT 0 CHECK (created_at_ns BETWEEN 0 AND 999),
					revoked_at      timestamptz,
					revoked_at_ns   smallint NOT NULL DEFAULT 0 CHECK (revoked_at_ns BETWEEN 0 AND 999),
					-- MATCH SIMPLE: an organization token (app_id NULL) is not
					-- checked against apps.
					FOREIGN KEY (app_id, organization_id) REFERENCES apps (id, organization_id)
				)`,
				`CREATE INDEX tokens_by_organization ON tokens (organization_id, created_at, created_at_ns, id)`,
				`CREATE INDEX tokens_by_app ON tokens (app_id, created_at, created_at_ns, id) WHERE app_id IS NOT NULL`,
			},
		},
		{
			version: 2,
			name:    "content records, channel keys and app revisions",
			stmts: []string{
				// revision moves on every change of the app or its records,
				// so readers can tell when what they cached is stale.
				`ALTER TABLE apps ADD COLUMN revision bigint NOT NULL DEFAULT 0`,
				`CREATE TABLE channel_keys (
					key        text COLLATE "C" PRIMARY KEY,
					app_id     text COLLATE "C" NOT NULL REFERENCES apps (id),
					channel_id text NOT NULL
				)`,
				`CREATE INDEX channel_keys_by_app ON channel_keys (app_id)`,
				// One table for every kind: each is a JSON document looked up
				// by app, kind and ID; location is pulled out for filters.
				`CREATE TABLE records (
					app_id     text COLLATE "C" NOT NULL REFERENCES apps (id),
					kind       text COLLATE "C" NOT NULL,
					id         text COLLATE "C" NOT NULL,
					doc        jsonb NOT NULL CHECK (jsonb_typeof(doc) = 'object'),
					location   text,
					created_at timestamptz NOT NULL,
					updated_at timestamptz NOT NULL,
					PRIMARY KEY (app_id, kind, id)
				)`,
			},
		},
		{
			version: 3,
			name:    "token scopes",
			stmts: []string{
				// Tokens made before scopes keep what they could do; new
				// tokens are always written with their scopes.
				`ALTER TABLE tokens ADD COLUMN scopes text NOT NULL DEFAULT 'content:read,content:write,events:write'`,
			},
		},
		{
			version: 4,
			name:    "stored vectors",
			stmts: []string{
				// Sentence-embedding vectors of an app's content by content
				// hash, so that a restart, a new replica or a new revision
				// embeds only what is new. vector is little-endian
				// float32s, which do not compress: EXTERNAL skips trying.
				// used_at is the store's time, to the microsecond. The rows
				// are a cache of the app's content and go with it.
				`CREATE TABLE vectors (
					app_id  text COLLATE "C" NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
					model   text COLLATE "C" NOT NULL,
					hash    bytea NOT NULL CHECK (length(hash) = 32),
					used_at timestamptz NOT NULL,
					vector  bytea NOT NULL,
					PRIMARY KEY (app_id, model, hash)
				)`,
				`ALTER TABLE vectors ALTER COLUMN vector SET STORAGE EXTERNAL`,
			},
		},
	}
}

// latestVersion is the schema version this code expects.
func latestVersion() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

// migrateLockKey is the pg_advisory_xact_lock key that serializes schema
// migrations of one database across processes. Advisory locks are per
// database, so the key only has to differ from the store's other keys.
const migrateLockKey int64 = 0x636d_735f_6d69_6772 // "cms_migr"

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// undefinedTable is the SQLSTATE of a query naming a table that does not
// exist.
const undefinedTable = "42P01"

// schemaVersion returns the highest applied migration, 0 for a new
// database.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v)
	if pgErrorCode(err) == undefinedTable {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migrate applies every migration the database lacks, all in one
// transaction that first takes an advisory lock: replicas starting at
// once wait for each other, and the one after the first finds nothing left
// to do. PostgreSQL's DDL is transactional, so a failure leaves the schema
// as it was.
func (s *Store) migrate(ctx context.Context) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreClosed(tx.Rollback(context.WithoutCancel(ctx))))
		}
	}()
	// Waiting for another replica's migrations, and the migrations
	// themselves, may take longer than the per-statement defaults meant
	// for requests; ctx bounds them instead.
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', '0', true), set_config('lock_timeout', '0', true)`); err != nil {
		return fmt.Errorf("lift timeouts: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
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
		for i, stmt := range m.stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("apply migration %d (%s): statement %d: %w", m.version, m.name, i+1, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("record migration %d: %w", m.version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// pgErrorCode returns the SQLSTATE of a server error, or "".
func pgErrorCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
