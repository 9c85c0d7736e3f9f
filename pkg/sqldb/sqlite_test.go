package sqldb_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// openEnv, when set, makes the test process one of the processes of
// TestSQLiteConcurrentOpenProcesses: it opens the SQLite file the variable
// names and does nothing else.
const openEnv = "SQLDB_TEST_SQLITE_OPEN"

// openDB opens dsn with sqldb.Open and closes it when the test ends.
func openDB(t *testing.T, dsn string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tenancyOf is the store of organizations, apps and tokens of db, closed
// when the test ends, before db. A test that closes db first closes it.
func tenancyOf(t *testing.T, db *sqldb.DB) *tenancydb.Store {
	t.Helper()
	s, err := tenancydb.New(t.Context(), db)
	if err != nil {
		t.Fatalf("tenancydb.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTemp opens a new SQLite file.
func openTemp(t *testing.T) (*sqldb.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "content.db")
	return openDB(t, path), path
}

func TestSQLitePragmas(t *testing.T) {
	db, _ := openTemp(t)
	ctx := t.Context()
	// Pin several connections at once so the check covers more than the
	// first one the pool opened.
	const n = 3
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.SQL().Conn(ctx)
		if err != nil {
			t.Fatalf("Conn: %v", err)
		}
		defer c.Close()
		conns[i] = c
	}
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
	}
	for i, c := range conns {
		for _, tt := range tests {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, tt.pragma, err)
			}
			if !strings.EqualFold(got, tt.want) {
				t.Errorf("conn %d: %s = %q, want %q", i, tt.pragma, got, tt.want)
			}
		}
	}
}

func TestSQLiteReopenKeepsDataAndMigrations(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	db := openDB(t, path)
	s := tenancyOf(t, db)
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	before := sqliteAppliedMigrations(t, db)
	if err := errors.Join(s.Close(), db.Close()); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db = openDB(t, path)
	s = tenancyOf(t, db)
	org, err := s.Organization(ctx, "org")
	if err != nil {
		t.Fatalf("Organization after reopen: %v", err)
	}
	if org.Name != "Org" || !org.CreatedAt.Equal(created) {
		t.Errorf("Organization after reopen = %+v", org)
	}
	migrations := sqldb.Migrations(sqldb.SQLite)
	after := sqliteAppliedMigrations(t, db)
	if len(after) != len(migrations) {
		t.Errorf("schema_migrations has %d rows, want %d", len(after), len(migrations))
	}
	for v, at := range before {
		if after[v] != at {
			t.Errorf("migration %d applied_at changed from %s to %s", v, at, after[v])
		}
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != db.LatestVersion() {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, db.LatestVersion())
	}
}

// sqliteAppliedMigrations reads schema_migrations: version to applied_at.
func sqliteAppliedMigrations(t *testing.T, db *sqldb.DB) map[int]string {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations`)
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	m := map[int]string{}
	for rows.Next() {
		var (
			v  int
			at string
		)
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatalf("scan schema_migrations: %v", err)
		}
		m[v] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return m
}

// TestSQLiteConcurrentOpen opens one new file from several goroutines,
// each with its own pool, as separate processes would: every Open must
// succeed and each migration must be recorded once.
func TestSQLiteConcurrentOpen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	const n = 6
	dbs := make([]*sqldb.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = sqldb.Open(ctx, path) })
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
	if got := sqliteAppliedMigrations(t, dbs[0]); len(got) != len(sqldb.Migrations(sqldb.SQLite)) {
		t.Errorf("schema_migrations = %v, want %d rows", got, len(sqldb.Migrations(sqldb.SQLite)))
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

// TestSQLiteConcurrentOpenProcesses is TestSQLiteConcurrentOpen across
// real processes, which is how the api and ingest services share the file.
func TestSQLiteConcurrentOpenProcesses(t *testing.T) {
	if path := os.Getenv(openEnv); path != "" {
		db, err := sqldb.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("no test executable: %v", err)
	}
	path := filepath.Join(t.TempDir(), "content.db")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.CommandContext(t.Context(), exe, "-test.run=^TestSQLiteConcurrentOpenProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), openEnv+"="+path)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatalf("start process %d: %v", i, err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	db := openDB(t, path)
	if got := sqliteAppliedMigrations(t, db); len(got) != len(sqldb.Migrations(sqldb.SQLite)) {
		t.Errorf("schema_migrations = %v, want %d rows", got, len(sqldb.Migrations(sqldb.SQLite)))
	}
}

func TestSQLiteNewerSchemaRefused(t *testing.T) {
	db, path := openTemp(t)
	ctx := t.Context()
	if _, err := db.SQL().ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		db.LatestVersion()+1, sqldb.FormatTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	db2, err := sqldb.Open(ctx, path)
	if err == nil {
		db2.Close()
		t.Fatal("Open succeeded on a database with a newer schema")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Errorf("error = %v", err)
	}
}

func TestSQLitePathNeedingEscape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%d.db")
	db := openDB(t, path)
	if err := db.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	db2, err := sqldb.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { db2.Close() })
	if _, err := tenancyOf(t, db2).Organization(t.Context(), "x"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("Organization = %v, want not found", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created at the given path: %v", err)
	}
}

func TestSQLiteCloseTwice(t *testing.T) {
	db, _ := openTemp(t)
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
