// Package devpostgres runs a private PostgreSQL server for tests and the
// local stack: Debian's server binaries with a cluster of its own in a
// directory, listening on loopback only, with trust authentication and
// durability switched off for speed. It is never used in production.
//
// initdb and the server refuse to run as root, so when the process is root
// both run as the postgres system user (created by Debian's postgresql
// package), which then owns the directory; otherwise they run as the
// current user.
package devpostgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/debpkg"
)

// Package is the Debian package the server comes from.
const Package = "postgresql"

// Superuser is the role the cluster is created with; DSNs connect as it.
const Superuser = "postgres"

// debianRoot is where Debian installs each major version's programs, in
// <major>/bin, off PATH.
const debianRoot = "/usr/lib/postgresql"

// Binaries are the server programs of one installation.
type Binaries struct {
	InitDB   string
	Postgres string
}

// FindBinaries returns the newest major version under Debian's
// /usr/lib/postgresql, or else initdb and postgres found on PATH.
func FindBinaries() (Binaries, error) {
	dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	// Newest first: "15" sorts after "9.6" by number, not by text.
	slices.SortFunc(dirs, func(a, b string) int { return slices.Compare(versionOf(b), versionOf(a)) })
	for _, dir := range dirs {
		b := Binaries{InitDB: filepath.Join(dir, "initdb"), Postgres: filepath.Join(dir, "postgres")}
		if isExecutable(b.InitDB) && isExecutable(b.Postgres) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return Binaries{InitDB: initdb, Postgres: postgres}, nil
	}
	return Binaries{}, fmt.Errorf("PostgreSQL server is not installed (no initdb and postgres in %s/*/bin or on PATH; apt-get install %s)", debianRoot, Package)
}

// versionOf reads the numbers of a /usr/lib/postgresql/<version>/bin path.
func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			break
		}
		v = append(v, n)
	}
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Install installs Debian's postgresql package with apt when the server
// programs are missing. It needs root; out is where apt's output goes.
func Install(ctx context.Context, out io.Writer) error {
	_, err := debpkg.EnsureFound(ctx, out, func() (string, error) {
		b, err := FindBinaries()
		return b.Postgres, err
	}, Package)
	return err
}

// Options configure Start.
type Options struct {
	// Dir holds the cluster (in Dir/data) and the server's Unix socket. It
	// is created when missing; its parent directories must be searchable
	// by the postgres user when the process is root (/tmp is).
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Log receives the output of initdb and the server; nil discards it.
	Log io.Writer
	// Database is created once the server is up; empty means "cms".
	Database string
}

// Server is a running private PostgreSQL server.
type Server struct {
	bin      Binaries
	dir      string
	port     int
	database string
	log      io.Writer
	tail     *tailBuffer
	// cred is who initdb and the server run as; nil means this process's
	// user.
	cred *syscall.Credential
	proc childproc.Slot
	// seq numbers the databases NewDatabase creates.
	seq atomic.Int64
}

// Start creates a cluster in o.Dir unless it has one, starts the server,
// waits until it accepts connections and creates o.Database.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("postgres directory: %w", err)
	}
	if o.Database == "" {
		o.Database = "cms"
	}
	s := &Server{bin: bin, dir: dir, port: o.Port, database: o.Database, log: o.Log, tail: &tailBuffer{max: 4096}}
	// A port found free can be taken by another process before the server
	// binds it; then another is tried.
	for attempt := 1; ; attempt++ {
		if o.Port == 0 {
			if s.port, err = childproc.FreePort(); err != nil {
				return nil, err
			}
		}
		if err := s.prepareDir(); err != nil {
			return nil, err
		}
		if err := s.initCluster(ctx); err != nil {
			return nil, err
		}
		err = s.Start(ctx)
		if err == nil {
			break
		}
		if o.Port != 0 || attempt == 3 || !strings.Contains(s.tail.String(), "Address already in use") {
			return nil, err
		}
	}
	if err := s.ensureDatabase(ctx, o.Database); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// prepareDir creates the directory and, as root, hands it to the postgres
// user.
func (s *Server) prepareDir() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create postgres directory: %w", err)
	}
	// The server refuses a socket path longer than the kernel's limit
	// (108 bytes with the terminating NUL).
	if sock := filepath.Join(s.dir, ".s.PGSQL."+strconv.Itoa(s.port)); len(sock) > 100 {
		return fmt.Errorf("postgres directory %s: socket path %s is too long for a Unix socket; use a shorter directory", s.dir, sock)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(Superuser)
	if err != nil {
		return fmt.Errorf("look up the %s system user (Debian's %s package creates it): %w", Superuser, Package, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("user %s: %w", Superuser, err)
	}
	// No supplementary groups: the server needs none of root's.
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := searchable(filepath.Dir(s.dir), s.cred); err != nil {
		return err
	}
	if err := os.Chown(s.dir, int(uid), int(gid)); err != nil {
		return fmt.Errorf("give %s to user %s: %w", s.dir, Superuser, err)
	}
	return nil
}

// searchable checks that cred's user can reach entries below dir, which
// root-only temporary directories (mode 0700) do not allow.
func searchable(dir string, cred *syscall.Credential) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("postgres directory: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		if ok && !(perm&0o001 != 0 || st.Uid == cred.Uid && perm&0o100 != 0 || st.Gid == cred.Gid && perm&0o010 != 0) {
			return fmt.Errorf("postgres directory: user %s cannot enter %s (mode %v); use a directory under /tmp", Superuser, p, fi.Mode().Perm())
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// output is where the child processes write: the caller's log and the tail
// kept for error messages.
func (s *Server) output() io.Writer {
	if s.log == nil {
		return s.tail
	}
	return io.MultiWriter(s.log, s.tail)
}

func (s *Server) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	// The postgres user may not be able to read the caller's working
	// directory, which initdb complains about.
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = s.output(), s.output()
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// initCluster runs initdb unless the directory already holds a cluster.
func (s *Server) initCluster(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.dataDir(), "PG_VERSION")); err == nil {
		return nil
	}
	// --no-sync: a test cluster need not survive a power cut.
	cmd := s.command(ctx, s.bin.InitDB, "-D", s.dataDir(), "-U", Superuser, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb in %s: %w\n%s", s.dataDir(), err, s.tail.String())
	}
	// Trust, but only over the socket in Dir and from loopback.
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	path := filepath.Join(s.dataDir(), "pg_hba.conf")
	if err := os.WriteFile(path, []byte(hba), 0o600); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("give pg_hba.conf to user %s: %w", Superuser, err)
		}
	}
	return nil
}

// serverSettings are passed on the command line, so that the cluster's
// own configuration files stay as initdb wrote them.
func (s *Server) serverSettings() []string {
	settings := []string{
		"listen_addresses=127.0.0.1",
		"port=" + strconv.Itoa(s.port),
		"unix_socket_directories=" + s.dir,
		// Test-only: without these a crash of the machine can corrupt the
		// cluster, which for a throwaway test server does not matter, and
		// every commit would wait for the disk.
		"fsync=off",
		"synchronous_commit=off",
		"full_page_writes=off",
	}
	args := make([]string, 0, 2*len(settings))
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	return args
}

// Start (re)starts a stopped server on the same port and directory and
// waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if s.proc.Running() {
		return errors.New("start postgres: already running")
	}
	// The server outlives ctx, which bounds only the wait for it.
	cmd := s.command(context.WithoutCancel(ctx), s.bin.Postgres, append([]string{"-D", s.dataDir()}, s.serverSettings()...)...)
	// Backends inherit the output pipe; after a kill they may hold it open
	// for a moment after the postmaster has gone.
	cmd.WaitDelay = 5 * time.Second
	proc, err := childproc.Start("postgres", cmd)
	if err != nil {
		return err
	}
	s.proc.Set(proc)
	const limit = 60 * time.Second
	deadline := time.Now().Add(limit)
	for {
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			s.proc.Clear()
			return fmt.Errorf("postgres exited during start-up: %w\n%s", err, s.tail.String())
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("start postgres: %w", ctx.Err()), s.Kill())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("postgres not accepting connections after %s: %w\n%s", limit, err, s.tail.String()), s.Kill())
		}
	}
}

// ping connects through the server's own Unix socket: over TCP, a port
// this server failed to bind might answer from another server.
func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.dir, s.port, Superuser))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory.
func (s *Server) Dir() string { return s.dir }

// Database is the database Start created.
func (s *Server) Database() string { return s.database }

// DSN is the connection string for database db, as the superuser over
// TCP.
func (s *Server) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// PID of the running postmaster, or 0.
func (s *Server) PID() int { return s.proc.PID() }

// CreateDatabase creates an empty database.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize(), "create database "+name)
}

// DropDatabase drops a database, ending the sessions still connected to
// it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)", "drop database "+name)
}

func (s *Server) ensureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// admin runs one statement in the postgres maintenance database; CREATE
// and DROP DATABASE cannot run in the database they name.
func (s *Server) admin(ctx context.Context, stmt, what string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Stop shuts the server down fast (SIGINT: sessions are ended, the
// cluster is left consistent) and waits; after 30 s it is killed.
func (s *Server) Stop() error { return s.proc.Signal(syscall.SIGINT, 30*time.Second) }

// Kill ends the postmaster with SIGKILL, as a crash would; its backends
// exit on their own once they see it gone, and the next Start recovers.
func (s *Server) Kill() error { return s.proc.Signal(syscall.SIGKILL, 10*time.Second) }

// NewDatabase creates a fresh empty database for one test, named after it,
// drops it when the test ends and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := databaseName(t.Name(), s.seq.Add(1))
	if err := s.CreateDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	return s.DSN(name)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

// databaseName makes a test name into an identifier within PostgreSQL's
// 63-byte limit, unique by seq.
func databaseName(test string, seq int64) string {
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(test), "_"), "_")
	suffix := "_" + strconv.FormatInt(seq, 10)
	if max := 63 - len("t_") - len(suffix); len(base) > max {
		base = base[:max]
	}
	return "t_" + base + suffix
}

// StartForTest starts a server of its own for one test in a new
// directory and stops it when the test ends. A missing installation fails
// the test with how to install it.
func StartForTest(t testing.TB) *Server {
	t.Helper()
	s, cleanup, err := startTemp()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// RunTests starts one server for a test package, stores it in *srv, runs
// the tests, then stops the server and removes its directory. A test
// package's TestMain is os.Exit(devpostgres.RunTests(m, &server)); each
// test then takes a fresh database with server.NewDatabase(t).
func RunTests(m interface{ Run() int }, srv **Server) int {
	s, cleanup, err := startTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devpostgres:", err)
		return 1
	}
	*srv = s
	code := m.Run()
	if err := cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "devpostgres:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// startTemp starts a server in a new directory under the system's
// temporary directory (which the postgres user can reach, unlike a
// test's TempDir); cleanup stops it and removes the directory.
func startTemp() (*Server, func() error, error) {
	dir, err := os.MkdirTemp("", "cms-postgres-*")
	if err != nil {
		return nil, nil, fmt.Errorf("create directory for postgres: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	cleanup := func() error {
		return errors.Join(s.Stop(), os.RemoveAll(dir))
	}
	return s, cleanup, nil
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
