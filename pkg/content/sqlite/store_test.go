package sqlite

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
	"github.com/assistantcms/cms/pkg/tenancy"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "content.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestContract(t *testing.T) {
	contenttest.Run(t, func(t *testing.T) content.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestPragmas(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	// Pin several connections at once so the check covers more than the
	// first one the pool opened.
	const n = 3
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := s.db.Conn(ctx)
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

func TestReopenKeepsDataAndMigrations(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	before := appliedMigrations(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	org, err := s.Organization(ctx, "org")
	if err != nil {
		t.Fatalf("Organization after reopen: %v", err)
	}
	if org.Name != "Org" || !org.CreatedAt.Equal(created) {
		t.Errorf("Organization after reopen = %+v", org)
	}
	after := appliedMigrations(t, s)
	if len(after) != len(migrations()) {
		t.Errorf("schema_migrations has %d rows, want %d", len(after), len(migrations()))
	}
	for v, at := range before {
		if after[v] != at {
			t.Errorf("migration %d applied_at changed from %s to %s", v, at, after[v])
		}
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestVersion() {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, latestVersion())
	}
}

func appliedMigrations(t *testing.T, s *Store) map[int]string {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations`)
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

// TestConcurrentOpen opens one new file from several goroutines, each with
// its own pool, as separate processes would: every Open must succeed and
// each migration must be recorded once.
func TestConcurrentOpen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	if got := appliedMigrations(t, stores[0]); len(got) != len(migrations()) {
		t.Errorf("schema_migrations = %v, want %d rows", got, len(migrations()))
	}
	// Every store sees writes made through the others.
	if err := stores[1].CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	for i, s := range stores {
		if _, err := s.Organization(ctx, "org"); err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
}

// TestConcurrentOpenProcesses is TestConcurrentOpen across real processes,
// which is how the api and ingest services share the file.
func TestConcurrentOpenProcesses(t *testing.T) {
	if path := os.Getenv("CONTENT_SQLITE_TEST_OPEN"); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := s.Close(); err != nil {
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
		cmds[i] = exec.CommandContext(t.Context(), exe, "-test.run=^TestConcurrentOpenProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "CONTENT_SQLITE_TEST_OPEN="+path)
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
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if got := appliedMigrations(t, s); len(got) != len(migrations()) {
		t.Errorf("schema_migrations = %v, want %d rows", got, len(migrations()))
	}
}

// TestTimesStoredAsText: the contract suite checks times round trip; here,
// their stored form, UTC text with nanoseconds that sorts as it reads.
func TestTimesStoredAsText(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	created := time.Date(2025, 6, 1, 20, 0, 0, 0, time.FixedZone("UTC-7", -7*60*60))
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := s.db.QueryRowContext(ctx, `SELECT created_at FROM organizations WHERE id = 'org'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := "2025-06-02T03:00:00.000000000Z"; stored != want {
		t.Errorf("stored created_at = %q, want %q", stored, want)
	}
}

func TestAppDocDefault(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var doc string
	if err := s.db.QueryRowContext(ctx, `SELECT doc FROM apps WHERE id = 'app'`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if doc != "{}" {
		t.Errorf("doc = %q, want {}", doc)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		latestVersion()+1, formatTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err == nil {
		s2.Close()
		t.Fatal("Open succeeded on a database with a newer schema")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Errorf("error = %v", err)
	}
}

func TestPathNeedingEscape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%d.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	s2, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if _, err := s2.Organization(t.Context(), "x"); !errors.Is(err, content.ErrNotFound) {
		t.Errorf("Organization = %v, want not found", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created at the given path: %v", err)
	}
}

func TestCloseTwice(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded")
	}
}
