// Package chstore is the ClickHouse side of the event pipeline: it
// connects, detects what the server supports and applies the versioned
// schema in schemas/clickhouse.
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

// table is a table of the store's database, quoted: on a cluster the
// Distributed table that reads every shard.
func (s *Store) table(name string) string { return "`" + s.cfg.Database + "`." + name }

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
		for _, st := range m.Statements {
			if err := s.exec(ctx, st); err != nil {
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

// QueryCount is how often a normalised raw query was asked.
type QueryCount struct {
	Query string
	Asked uint64
}

// Suggestable says which past queries may be suggested to other users.
type Suggestable struct {
	// MinUsers is how many distinct user IDs, and how many distinct
	// session IDs, must have asked a query. Runtimes choose both, so
	// they bound a query further but cannot make it suggestable alone.
	MinUsers int
	// MinSources is how many distinct sources (an access token and a
	// client network, as the server saw them) must have asked it; 0
	// means MinUsers.
	MinSources int
	// Days is the window, ending today, whose questions count.
	Days int
}

// DefaultMinUsers is the default of Suggestable.MinUsers.
const DefaultMinUsers = 5

// withDefaults fills the fields whose zero means a default.
func (r Suggestable) withDefaults() Suggestable {
	if r.MinSources == 0 {
		r.MinSources = r.MinUsers
	}
	return r
}

// Check reports a rule that cannot hold.
func (r Suggestable) Check() error {
	if r.MinUsers < 1 {
		return fmt.Errorf("suggested queries need at least %d distinct users: want 1 or more", r.MinUsers)
	}
	if r.MinSources < 0 {
		return fmt.Errorf("suggested queries need at least %d distinct sources: want 1 or more (0: as many as users)", r.MinSources)
	}
	if r.Days < 1 {
		return fmt.Errorf("suggested queries over a window of %d days: want 1 or more", r.Days)
	}
	return nil
}

// topQueriesSQL reads the suggestable queries of db; its parameters are
// the app, the channel, the window's days, the app again, the channel
// again, the users and sessions needed, the sources needed and the
// limit. Days after today are never read: event times are the server's
// (see migration 9), and rows dated later came another way. Queries an
// operator blocked, on the channel or on every channel of the app, are
// left out; GLOBAL, so that on a cluster the blocks are read once, through
// their Distributed table.
func topQueriesSQL(db string) string {
	return "SELECT query, countMerge(asked) AS n FROM `" + db + "`.query_sources " +
		"WHERE app_id = ? AND channel = ? AND day > today() - ? AND day <= today() " +
		"AND query GLOBAL NOT IN (SELECT query FROM `" + db + "`.suggestion_blocks WHERE app_id = ? AND channel IN ('', ?) " +
		"GROUP BY channel, query HAVING argMax(blocked, version) = 1) " +
		"GROUP BY query HAVING uniqMerge(users) >= ? AND uniqMerge(sessions) >= ? AND uniqMerge(sources) >= ? " +
		"ORDER BY n DESC, query LIMIT ?"
}

// TopQueries returns the queries of an app's channel that at least
// r.MinUsers distinct users in as many sessions, from r.MinSources
// distinct sources, asked within the last r.Days days, most asked first,
// from query_sources, less those an operator blocked. Queries that look
// like they hold personal data are never written there; they are left
// out here too, in case rows came by another way.
func (s *Store) TopQueries(ctx context.Context, appID, channel string, limit int, r Suggestable) ([]QueryCount, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	r = r.withDefaults()
	rows, err := s.conn.Query(s.Context(ctx), topQueriesSQL(s.cfg.Database), appID, channel, r.Days, appID, channel,
		r.MinUsers, r.MinUsers, r.MinSources, limit)
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
		if !chschema.IsPrivate(q.Query) {
			out = append(out, q)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read top queries of %s/%s: %w", appID, channel, err)
	}
	return out, nil
}
