package devpostgres

import (
	"context"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestVersionOrder(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/16/bin"}
	slices.SortFunc(dirs, func(a, b string) int { return slices.Compare(versionOf(b), versionOf(a)) })
	want := []string{"/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/9.6/bin"}
	if !slices.Equal(dirs, want) {
		t.Errorf("newest first = %v, want %v", dirs, want)
	}
}

func TestFindBinaries(t *testing.T) {
	b, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{b.InitDB, b.Postgres} {
		if !isExecutable(p) {
			t.Errorf("%s is not an executable", p)
		}
	}
	// Debian's directory wins over PATH when it has the programs.
	if dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin", "postgres")); len(dirs) > 0 && !strings.HasPrefix(b.Postgres, debianRoot+"/") {
		t.Errorf("postgres = %s, want one under %s", b.Postgres, debianRoot)
	}
	if filepath.Dir(b.InitDB) != filepath.Dir(b.Postgres) {
		t.Errorf("initdb %s and postgres %s come from different installations", b.InitDB, b.Postgres)
	}
}

func TestDatabaseName(t *testing.T) {
	for _, tt := range []struct {
		test string
		seq  int64
		want string
	}{
		{"TestX", 1, "t_testx_1"},
		{"TestContract/Import_Is-Atomic", 12, "t_testcontract_import_is_atomic_12"},
		{strings.Repeat("a", 100), 3, "t_" + strings.Repeat("a", 59) + "_3"},
	} {
		if got := databaseName(tt.test, tt.seq); got != tt.want || len(got) > 63 {
			t.Errorf("databaseName(%q, %d) = %q, want %q", tt.test, tt.seq, got, tt.want)
		}
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestServerStartsAnswersAndRestarts(t *testing.T) {
	ctx := t.Context()
	s := StartForTest(t)
	conn := connect(t, s.DSN(s.Database()))
	for _, tt := range []struct{ setting, want string }{
		{"listen_addresses", "127.0.0.1"},
		{"port", strconv.Itoa(s.Port())},
		{"unix_socket_directories", s.Dir()},
		{"fsync", "off"},
		{"synchronous_commit", "off"},
		{"full_page_writes", "off"},
		{"server_encoding", "UTF8"},
		{"is_superuser", "on"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", tt.setting).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tt.setting, err)
		}
		if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.setting, got, tt.want)
		}
	}
	var who string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != Superuser {
		t.Errorf("current_user = %q, %v; want %s", who, err, Superuser)
	}
	// As root the cluster belongs to the postgres user, which the server
	// runs as.
	fi, err := os.Stat(filepath.Join(s.Dir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	wantUID := os.Geteuid()
	if wantUID == 0 {
		u, err := user.Lookup(Superuser)
		if err != nil {
			t.Fatal(err)
		}
		wantUID, _ = strconv.Atoi(u.Uid)
	}
	if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != wantUID {
		t.Errorf("data directory owned by uid %d, want %d", uid, wantUID)
	}

	if err := s.CreateDatabase(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	kept := connect(t, s.DSN("kept"))
	if _, err := kept.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	kept.Close(ctx)

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.PID() != 0 {
		t.Errorf("PID after Stop = %d", s.PID())
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(cctx, s.DSN("kept")); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := connect(t, s.DSN("kept")).QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 7 {
		t.Errorf("data after restart: %d %v", x, err)
	}
}

func TestNewDatabaseIsFreshAndDropped(t *testing.T) {
	s := StartForTest(t)
	var names []string
	for i := range 2 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			conn := connect(t, s.NewDatabase(t))
			var name string
			var tables int
			if err := conn.QueryRow(t.Context(), `SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&name, &tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("database %s has %d tables, want none", name, tables)
			}
			if _, err := conn.Exec(t.Context(), "CREATE TABLE t (x int)"); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			conn.Close(t.Context())
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases %v, want two different ones", names)
	}
	conn := connect(t, s.DSN("postgres"))
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d test databases left after their tests ended", left)
	}
}

func TestStartRefusesUnreachableDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the server runs as this user, who can reach any directory it can create")
	}
	// A test's TempDir is under a root-only (0700) directory.
	_, err := Start(t.Context(), Options{Dir: filepath.Join(t.TempDir(), "pg")})
	if err == nil || !strings.Contains(err.Error(), "cannot enter") {
		t.Fatalf("Start = %v, want an error saying the postgres user cannot enter the directory", err)
	}
}

// TestStartFailureShowsServerOutput: a port taken by someone else makes the
// server exit, and the error carries the server's own words.
func TestStartFailureShowsServerOutput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir, err := os.MkdirTemp("", "cms-postgres-test-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := Start(t.Context(), Options{Dir: dir, Port: l.Addr().(*net.TCPAddr).Port})
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded on a port in use")
	}
	if !strings.Contains(err.Error(), "exited during start-up") || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("Start = %v, want it to say the server exited and why", err)
	}
}
