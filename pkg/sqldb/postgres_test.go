package sqldb_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver of database/sql

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/internal/revisionwatch"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// server is the package's PostgreSQL server; each test takes a fresh
// database on it.
var server *devpostgres.Server

func TestMain(m *testing.M) {
	if os.Getenv(openEnv) != "" {
		// A process of TestSQLiteConcurrentOpenProcesses, which needs no
		// PostgreSQL server.
		os.Exit(m.Run())
	}
	os.Exit(devpostgres.RunTests(m, &server))
}

// rawPostgres opens dsn through database/sql without migrating it.
func rawPostgres(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// postgresAppliedMigrations reads schema_migrations: version to
// applied_at.
func postgresAppliedMigrations(t *testing.T, q sqldb.Querier) map[int]time.Time {
	t.Helper()
	rows, err := q.QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations`)
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	m := map[int]time.Time{}
	for rows.Next() {
		var (
			v  int
			at time.Time
		)
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatalf("scan schema_migrations: %v", err)
		}
		if _, dup := m[v]; dup {
			t.Errorf("migration %d recorded twice", v)
		}
		m[v] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return m
}

// TestPostgresConcurrentMigrations opens one empty database from several
// goroutines, each with its own pool, as replicas starting together
// would: every Open succeeds and each migration is recorded once.
func TestPostgresConcurrentMigrations(t *testing.T) {
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	const n = 4
	dbs := make([]*sqldb.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = sqldb.Open(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	if t.Failed() {
		return
	}
	migrations := sqldb.Migrations(sqldb.Postgres)
	got := postgresAppliedMigrations(t, dbs[0].SQL())
	if len(got) != len(migrations) {
		t.Errorf("schema_migrations = %v, want one row for each of %d migrations", got, len(migrations))
	}
	for _, m := range migrations {
		if _, ok := got[m.Version]; !ok {
			t.Errorf("migration %d not recorded", m.Version)
		}
	}
	for i, db := range dbs {
		if v, err := db.SchemaVersion(ctx); err != nil || v != db.LatestVersion() {
			t.Errorf("database %d: SchemaVersion = %d, %v; want %d", i, v, err, db.LatestVersion())
		}
	}
	// Every database sees writes made through the others.
	stores := make([]*tenancydb.Store, n)
	for i, db := range dbs {
		stores[i] = tenancyOf(t, db)
	}
	if err := stores[1].CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	for i, s := range stores {
		if _, err := s.Organization(ctx, "org"); err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
}

func TestPostgresSchemaVersion(t *testing.T) {
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	raw := rawPostgres(t, dsn)
	if v, err := sqldb.PostgresVersion(ctx, raw); err != nil || v != 0 {
		t.Fatalf("schema version of an empty database = %d, %v; want 0", v, err)
	}

	db := openDB(t, dsn)
	if v, err := db.SchemaVersion(ctx); err != nil || v != db.LatestVersion() {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, db.LatestVersion())
	}
	s := tenancyOf(t, db)
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before := postgresAppliedMigrations(t, raw)
	s.Close()
	db.Close()

	// Reopening keeps the data and applies nothing again.
	db = openDB(t, dsn)
	if _, err := tenancyOf(t, db).Organization(ctx, "org"); err != nil {
		t.Errorf("Organization after reopen: %v", err)
	}
	after := postgresAppliedMigrations(t, raw)
	for v, at := range before {
		if !after[v].Equal(at) {
			t.Errorf("migration %d applied_at changed from %s to %s", v, at, after[v])
		}
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != db.LatestVersion() {
		t.Errorf("SchemaVersion after reopen = %d, %v", v, err)
	}

	// A schema newer than the code is refused, not downgraded.
	if _, err := raw.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')`, db.LatestVersion()+1); err != nil {
		t.Fatal(err)
	}
	if db2, err := sqldb.Open(ctx, dsn); err == nil {
		db2.Close()
		t.Error("Open succeeded on a database with a newer schema")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open error = %v, want it to say the schema is newer", err)
	}
}

// TestPostgresConnectionSettings checks the timeouts every pooled
// connection gets and that the DSN overrides them and the pool size.
func TestPostgresConnectionSettings(t *testing.T) {
	dsn := server.NewDatabase(t)
	tests := []struct {
		name         string
		params       string
		statement    string
		lock         string
		maxConns     int32
		cancelsAfter time.Duration // 0: no query is run against the limit
	}{
		{name: "defaults", params: "", statement: "5s", lock: "3s"},
		{name: "parameters", params: "&statement_timeout=200ms&lock_timeout=100ms&pool_max_conns=2",
			statement: "200ms", lock: "100ms", maxConns: 2, cancelsAfter: 200 * time.Millisecond},
		{name: "options", params: "&options=-c%20statement_timeout%3D300ms",
			statement: "300ms", lock: "3s", cancelsAfter: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			db := openDB(t, dsn+tt.params)
			maxConns := db.Pool().Config().MaxConns
			if tt.maxConns != 0 && maxConns != tt.maxConns {
				t.Errorf("MaxConns = %d, want %d", maxConns, tt.maxConns)
			}
			// Hold every connection the pool may open at once, so the
			// check covers more than the first.
			conns := make([]*sql.Conn, maxConns)
			for i := range conns {
				c, err := db.SQL().Conn(ctx)
				if err != nil {
					t.Fatalf("Conn: %v", err)
				}
				defer c.Close()
				conns[i] = c
			}
			for i, c := range conns {
				var statement, lock string
				if err := c.QueryRowContext(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&statement, &lock); err != nil {
					t.Fatal(err)
				}
				if statement != tt.statement || lock != tt.lock {
					t.Errorf("conn %d: statement_timeout %q, lock_timeout %q; want %q, %q", i, statement, lock, tt.statement, tt.lock)
				}
			}
			if tt.cancelsAfter == 0 {
				return
			}
			start := time.Now()
			_, err := conns[0].ExecContext(ctx, `SELECT pg_sleep(10)`)
			if code := pgErrorCode(err); code != "57014" { // query_canceled
				t.Errorf("pg_sleep(10) = %v, want it cancelled by statement_timeout", err)
			}
			if took := time.Since(start); took < tt.cancelsAfter || took > 5*time.Second {
				t.Errorf("pg_sleep(10) ended after %s, want about %s", took, tt.cancelsAfter)
			}
		})
	}
}

// pgErrorCode is the SQLSTATE of a PostgreSQL error, "" for another.
func pgErrorCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestPostgresStoppedServer uses a server of its own: Ping names the
// database when the server is gone, and the pool and WatchRevisions
// recover once it is back.
func TestPostgresStoppedServer(t *testing.T) {
	ctx := t.Context()
	srv := devpostgres.StartForTest(t)
	db := openDB(t, srv.DSN(srv.Database()))
	s := tenancyOf(t, db)
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w := revisionwatch.Start(t, db)
	w.Ready(t)

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	err := db.Ping(ctx)
	wantName := fmt.Sprintf("ping content database 127.0.0.1:%d/%s: ", srv.Port(), srv.Database())
	if err == nil || !strings.Contains(err.Error(), wantName) || errors.Unwrap(err) == nil {
		t.Fatalf("Ping with the server stopped = %v, want a wrapped error starting %q", err, wantName)
	}

	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Pooled connections to the old server fail once each before the pool
	// replaces them.
	deadline := time.Now().Add(10 * time.Second)
	for err := db.Ping(ctx); err != nil; err = db.Ping(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("Ping after restart: %v", err)
		}
	}
	// The watcher reconnects, says so, and passes notifications on again;
	// it told why the connection it had ended.
	w.Ready(t)
	select {
	case err := <-w.Failed:
		if !strings.Contains(err.Error(), "watch revisions") {
			t.Errorf("reported %v, want an error saying what failed", err)
		}
	default:
		t.Error("the lost connection was not reported")
	}
	if err := s.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.Expect(t, "app")
}

func TestPostgresOpenErrors(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name, dsn, want string
	}{
		{"unparsable", "postgres://u:s3cret@127.0.0.1:notaport/x", "open content database: cannot parse the DSN: invalid port"},
		{"bad pool setting", server.DSN("x") + "&pool_max_conns=many", "cannot parse pool_max_conns"},
		{"missing database", server.DSN("no_such_database"), fmt.Sprintf("open content database 127.0.0.1:%d/no_such_database: connect: ", server.Port())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sqldb.Open(ctx, tt.dsn)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open = %v, want it to contain %q and no password", err, tt.want)
			}
		})
	}
}

func TestPostgresCloseTwice(t *testing.T) {
	db := openDB(t, server.NewDatabase(t))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := db.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded")
	}
}
