// Package chstore is the ClickHouse side of the event pipeline: it
// connects, detects what the server supports and applies the versioned
// schema in schemas/clickhouse.
package chstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Config names the server and the schema choices.
type Config struct {
	Addrs    []string
	Database string
	Username string
	Password string
	// TLS secures the connections; the zero value is plain.
	TLS TLS
	// RetentionDays drops older events where the server supports TTL.
	RetentionDays int
	DialTimeout   time.Duration
	// StringColumns, when set, sizes the String columns of event inserts;
	// see InstallStringColumns.
	StringColumns *StringColumns
}

// Store is a connection to ClickHouse with the server's features known.
type Store struct {
	conn     driver.Conn
	cfg      Config
	version  chschema.Version
	features chschema.Features
}

// Open connects and reads the server version.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Database == "" {
		cfg.Database = "default"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	tlsConfig, err := cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        cfg.Addrs,
		Auth:        clickhouse.Auth{Database: "default", Username: cfg.Username, Password: cfg.Password},
		DialTimeout: cfg.DialTimeout,
		TLS:         tlsConfig,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to ClickHouse %v: %w", cfg.Addrs, err)
	}
	var raw string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&raw); err != nil {
		conn.Close()
		return nil, fmt.Errorf("read ClickHouse version from %v: %w", cfg.Addrs, explainDial(cfg.TLS, err))
	}
	v, err := chschema.ParseVersion(raw)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Store{conn: conn, cfg: cfg, version: v, features: chschema.FeaturesOf(v)}, nil
}

// Version is the server's version.
func (s *Store) Version() chschema.Version { return s.version }

// Features is what the server supports.
func (s *Store) Features() chschema.Features { return s.features }

// Conn is the underlying connection.
func (s *Store) Conn() driver.Conn { return s.conn }

// Context adds the settings every statement needs on this server.
func (s *Store) Context(ctx context.Context) context.Context {
	if !s.features.LowCardinalitySetting {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
		"allow_experimental_low_cardinality_type": 1,
	}))
}

// Close closes the connection.
func (s *Store) Close() error { return s.conn.Close() }

// Ping checks that the server answers, for readiness.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// Migrate applies the migrations the database does not have yet. Every
// statement is idempotent and the migrations table collapses repeated
// rows, so consumers starting at once may all run it.
func (s *Store) Migrate(ctx context.Context) (applied []int, err error) {
	ctx = s.Context(ctx)
	db := "`" + s.cfg.Database + "`"
	if err := s.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		return nil, fmt.Errorf("create database %s: %w", s.cfg.Database, err)
	}
	if err := s.conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+db+".schema_migrations "+
		"(version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplacingMergeTree ORDER BY version"); err != nil {
		return nil, fmt.Errorf("create migrations table: %w", err)
	}
	done, err := s.AppliedVersions(ctx)
	if err != nil {
		return nil, err
	}
	migs, err := chschema.Render(s.features, chschema.Options{Database: s.cfg.Database, RetentionDays: s.cfg.RetentionDays})
	if err != nil {
		return nil, err
	}
	for _, m := range migs {
		if done[m.Version] {
			continue
		}
		for _, st := range m.Statements {
			if err := s.conn.Exec(ctx, st); err != nil && !columnExists(err) {
				return applied, fmt.Errorf("apply migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		// The 18.16 server only takes inserts as data blocks, so even this
		// one row goes through a batch.
		b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
		if err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC()); err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		if err := b.Send(); err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// columnExists reports the error of ADD COLUMN for a column another
// consumer added first, on servers without ADD COLUMN IF NOT EXISTS.
func columnExists(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == chschema.ErrColumnExists
}

// AppliedVersions returns the migration versions recorded as applied.
func (s *Store) AppliedVersions(ctx context.Context) (map[int]bool, error) {
	rows, err := s.conn.Query(s.Context(ctx), "SELECT DISTINCT version FROM `"+s.cfg.Database+"`.schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		done[int(v)] = true
	}
	return done, rows.Err()
}

// QueryCount is how often a normalised raw query was asked.
type QueryCount struct {
	Query string
	Asked uint64
}

// TopQueries returns the most asked queries of an app's channel from the
// query-count view, most asked first.
func (s *Store) TopQueries(ctx context.Context, appID, channel string, limit int) ([]QueryCount, error) {
	rows, err := s.conn.Query(s.Context(ctx), "SELECT query, sum(asked) AS n FROM `"+s.cfg.Database+"`.query_counts "+
		"WHERE app_id = ? AND channel = ? GROUP BY query ORDER BY n DESC, query LIMIT ?", appID, channel, limit)
	if err != nil {
		return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
	}
	defer rows.Close()
	var out []QueryCount
	for rows.Next() {
		var q QueryCount
		if err := rows.Scan(&q.Query, &q.Asked); err != nil {
			return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
		}
		out = append(out, q)
	}
	return out, rows.Err()
}
