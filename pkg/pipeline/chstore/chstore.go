// Package chstore is where the event pipeline stores its rows in
// ClickHouse: it connects (over TLS, to one server or a cluster), learns
// what the server supports, applies the versioned schema of
// schemas/clickhouse and inserts the consumer's events and quarantine
// records. Other jobs on the same tables use its Store from packages of
// their own: queryhistory (suggestions' history), analyticsreport (the
// analytics page), forgetuser, and resubmit (quarantine reads).
package chstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// Cluster, when set, names the cluster (in the servers'
	// remote_servers) the tables are spread over: migrations run ON
	// CLUSTER and create replicated shard-local tables with Distributed
	// tables under the usual names (see schemas/clickhouse Options), and
	// inserts go through the Distributed tables synchronously, so that an
	// acknowledged insert is on its shard.
	Cluster string
	// HistoryDays is how many days query_sources keeps where the server
	// supports TTL, never more than RetentionDays when that is set; 0
	// means the schema's default (90).
	HistoryDays int
}

// Store is a connection to ClickHouse with the server's features known.
type Store struct {
	conn     driver.Conn
	cfg      Config
	version  chschema.Version
	features chschema.Features
	// settings go with every statement; see Context.
	settings clickhouse.Settings
}

// Check refuses, without connecting, settings no connection can be made
// with: a malformed cluster name, unreadable or mismatched TLS files.
func (c Config) Check() error {
	if err := chschema.CheckCluster(c.Cluster); err != nil {
		return err
	}
	_, err := c.TLS.Config(tlsNames)
	return err
}

// Open connects and reads the server version.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Database == "" {
		cfg.Database = "default"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if err := chschema.CheckCluster(cfg.Cluster); err != nil {
		return nil, err
	}
	tlsConfig, err := cfg.TLS.Config(tlsNames)
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
	s := &Store{conn: conn, cfg: cfg, version: v, features: chschema.FeaturesOf(v), settings: clickhouse.Settings{}}
	if s.features.LowCardinalitySetting {
		s.settings["allow_experimental_low_cardinality_type"] = 1
	}
	if cfg.Cluster != "" {
		// An insert into a Distributed table returns once every shard's
		// part is written on one of its replicas (the servers' default
		// queues it on the receiving server and sends it later), so the
		// consumer commits offsets only for rows that are on their shard.
		s.settings["insert_distributed_sync"] = 1
		if err := s.checkCluster(ctx); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return s, nil
}

// checkCluster makes sure the server knows the configured cluster, so
// that a misspelt name fails at start rather than at the first DDL.
func (s *Store) checkCluster(ctx context.Context) error {
	var hosts uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", s.cfg.Cluster).Scan(&hosts); err != nil {
		return fmt.Errorf("read cluster %q from ClickHouse %v: %w", s.cfg.Cluster, s.cfg.Addrs, err)
	}
	if hosts == 0 {
		return fmt.Errorf("ClickHouse %v has no cluster %q in its remote_servers configuration", s.cfg.Addrs, s.cfg.Cluster)
	}
	return nil
}

// Cluster is the configured cluster's name; empty for one server.
func (s *Store) Cluster() string { return s.cfg.Cluster }

// Version is the server's version.
func (s *Store) Version() chschema.Version { return s.version }

// Database is the name of the database holding the tables.
func (s *Store) Database() string { return s.cfg.Database }

// Addrs are the addresses connected to, for messages.
func (s *Store) Addrs() []string { return s.cfg.Addrs }

// Table is a table of the store's database, quoted: on a cluster the
// Distributed table that reads every shard.
func (s *Store) Table(name string) string { return "`" + s.cfg.Database + "`." + name }

// LocalTable is the name of the table holding a table's rows on one
// server: the shard-local table in a cluster, the table itself otherwise.
func (s *Store) LocalTable(name string) string {
	t := s.Table(name)
	if s.cfg.Cluster != "" {
		t += chschema.LocalSuffix
	}
	return t
}

// OpenReplica connects to one server of the store's cluster, by address,
// with the store's credentials and TLS settings, as a server on its own:
// inserts through it are not distributed. An empty address is the store
// itself.
func (s *Store) OpenReplica(ctx context.Context, addr string) (*Store, error) {
	if addr == "" {
		return s, nil
	}
	cfg := s.cfg
	cfg.Addrs, cfg.Cluster = []string{addr}, ""
	c, err := Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to replica %s of cluster %s: %w", addr, s.cfg.Cluster, err)
	}
	return c, nil
}

// Features is what the server supports.
func (s *Store) Features() chschema.Features { return s.features }

// Conn is the underlying connection.
func (s *Store) Conn() driver.Conn { return s.conn }

// Context adds the settings every statement needs on this server.
func (s *Store) Context(ctx context.Context) context.Context {
	if len(s.settings) == 0 {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(s.settings))
}

// schemaOptions are the options the migrations are rendered with.
func (s *Store) schemaOptions() chschema.Options {
	return chschema.Options{Database: s.cfg.Database, RetentionDays: s.cfg.RetentionDays, Cluster: s.cfg.Cluster, HistoryDays: s.cfg.HistoryDays}
}

// Close closes the connection.
func (s *Store) Close() error { return s.conn.Close() }

// Ping checks that the server answers, for readiness.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// Migrate applies the migrations the database does not have yet. Every
// statement is idempotent and the migrations table collapses repeated
// rows, so consumers starting at once may all run it. In a cluster the
// statements run ON CLUSTER, through the servers' distributed DDL queue,
// which runs them on every server one after another; the migrations
// table is replicated to every server, so a migration recorded through
// one server is skipped by consumers of any other.
func (s *Store) Migrate(ctx context.Context) (applied []int, err error) {
	ctx = s.Context(ctx)
	db := "`" + s.cfg.Database + "`"
	opts := s.schemaOptions()
	create, err := chschema.CreateDatabase(opts)
	if err != nil {
		return nil, err
	}
	if err := s.exec(ctx, create); err != nil {
		return nil, fmt.Errorf("create database %s: %w", s.cfg.Database, err)
	}
	create, err = chschema.MigrationsTable(opts)
	if err != nil {
		return nil, err
	}
	if err := s.exec(ctx, create); err != nil {
		return nil, fmt.Errorf("create migrations table: %w", err)
	}
	done, err := s.AppliedVersions(ctx)
	if err != nil {
		return nil, err
	}
	migs, err := chschema.Render(s.features, opts)
	if err != nil {
		return nil, err
	}
	for _, m := range migs {
		if done[m.Version] {
			continue
		}
		ran, err := s.apply(ctx, db, m)
		if err != nil {
			return applied, err
		}
		if ran {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// MigrationLockWait is how long a runner waits for another to apply a
// migration that moves a table before it gives up.
const MigrationLockWait = 10 * time.Minute

// apply runs one migration and records it; false when another runner
// applied it meanwhile. A migration that moves a table is applied by one
// runner at a time, under its lock (see chschema.MigrationLock).
func (s *Store) apply(ctx context.Context, db string, m chschema.Migration) (ran bool, err error) {
	if m.SkipOnce != "" {
		release, ranElsewhere, err := s.lockMigration(ctx, m)
		if err != nil || ranElsewhere {
			return false, err
		}
		defer func() {
			if rerr := release(); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	if err := m.Run(func(st string) error { return s.exec(ctx, st) }, func(q string) (bool, error) {
		var done uint8
		err := s.conn.QueryRow(ctx, q).Scan(&done)
		return done == 1, err
	}); err != nil {
		return false, fmt.Errorf("apply %w", err)
	}
	// The 18.16 server only takes inserts as data blocks, so even this
	// one row goes through a batch.
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_at)")
	if err != nil {
		return false, fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC()); err != nil {
		return false, fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := b.Send(); err != nil {
		return false, fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	return true, nil
}

// lockMigration takes m's lock, waiting while another runner holds it,
// and returns how to give it back; ran is true when the other runner
// applied m meanwhile (then nothing is held).
func (s *Store) lockMigration(ctx context.Context, m chschema.Migration) (release func() error, ran bool, err error) {
	take, give, err := chschema.MigrationLock(s.schemaOptions(), m.Version)
	if err != nil {
		return nil, false, err
	}
	deadline := time.Now().Add(MigrationLockWait)
	for {
		err := s.conn.Exec(ctx, take)
		if err == nil {
			return func() error {
				if err := s.conn.Exec(context.WithoutCancel(ctx), give); err != nil {
					return fmt.Errorf("migration %d applied, but its lock not given back (run %s): %w", m.Version, give, err)
				}
				return nil
			}, false, nil
		}
		if !alreadyExists(err) && !strings.Contains(err.Error(), "already exists") {
			return nil, false, fmt.Errorf("take the lock of migration %d: %w", m.Version, err)
		}
		done, err := s.AppliedVersions(ctx)
		if err != nil {
			return nil, false, err
		}
		if done[m.Version] {
			return nil, true, nil
		}
		if time.Now().After(deadline) {
			return nil, false, fmt.Errorf("migration %d (%s) has been applied by another process for over %v; if none is applying it, its lock is left from one that stopped: %s, and start again",
				m.Version, m.Name, MigrationLockWait, give)
		}
		// Another runner holds the lock: what it does shows in the
		// migrations table, which is read again after a pause.
		select {
		case <-ctx.Done():
			return nil, false, fmt.Errorf("wait for migration %d: %w", m.Version, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// exec runs one schema statement. What another consumer has done first is
// done: a column or table that exists already.
func (s *Store) exec(ctx context.Context, st string) error {
	err := s.conn.Exec(ctx, st)
	if err == nil || alreadyExists(err) || (strings.Contains(st, " ADD COLUMN ") && columnExists(err)) {
		return nil
	}
	if s.cfg.Cluster != "" && strings.Contains(err.Error(), "allow_experimental_low_cardinality_type") {
		// Statements run ON CLUSTER take the servers' default profile,
		// not the settings sent with them.
		return fmt.Errorf("%w (servers before 19.9 need allow_experimental_low_cardinality_type = 1 in the default settings profile for the cluster's DDL)", err)
	}
	return err
}

// Server error codes of objects another consumer created first, where
// IF NOT EXISTS does not cover the race.
const (
	errTableExists    = 57
	errDatabaseExists = 82
)

// alreadyExists reports the error of creating a table or database that
// was created between the server's check and its creation.
func alreadyExists(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && (ex.Code == errTableExists || ex.Code == errDatabaseExists)
}

// columnExists reports the error of ADD COLUMN for a column another
// consumer added first, on servers without ADD COLUMN IF NOT EXISTS. The
// code is shared with other errors about columns; the message tells.
func columnExists(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == chschema.ErrColumnExists && strings.Contains(ex.Message, "already exists")
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
