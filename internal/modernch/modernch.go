// Package modernch runs statements on a current ClickHouse engine for
// tests: chDB (the npm package chdb, pinned in package-lock.json), a
// ClickHouse build that runs inside a Node.js process. The development
// server of internal/devclickhouse is Debian's 18.16; this engine checks
// that what the schema renders for current servers, and the analysts'
// queries, really run there, which a SQL parser cannot tell. It is never
// used in production.
//
// The packages are installed in this directory's node_modules from
// package-lock.json by `npm install --no-save --ignore-scripts` (the test
// command does it); chdb's own install script does nothing, and its engine
// comes prebuilt in @chdb/lib-linux-x64-gnu.
package modernch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Error is a statement the engine refused.
type Error struct {
	// Code is the server's error code, such as 36 (BAD_ARGUMENTS) or 62
	// (SYNTAX_ERROR); 0 when the message carries none.
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Column is a column of a query's result.
type Column struct{ Name, Type string }

// Result is what a query returned, as ClickHouse's JSONCompact format
// gives it: numbers are json.Number (64-bit integers come as strings),
// NULL is nil, arrays are []any.
type Result struct {
	Columns []Column
	Rows    [][]any
}

// Options configure Open.
type Options struct {
	// Dir keeps the session's databases; it must exist.
	Dir string
	// Log receives what the Node.js process writes to stderr; nil
	// discards it.
	Log io.Writer
	// Cluster, when set, names a cluster of one shard on this engine
	// itself, so that Distributed tables over it can be created and
	// queried (the engine has no clusters of its own).
	Cluster string
}

// clusterConfig declares cluster as one local shard. The port is the one
// the engine takes for its own, so Distributed queries run in process.
const clusterConfig = `<clickhouse>
    <tcp_port>9000</tcp_port>
    <remote_servers>
        <%s>
            <shard><replica><host>localhost</host><port>9000</port></replica></shard>
        </%s>
    </remote_servers>
</clickhouse>
`

// Session is a Node.js process holding one chDB session. Its methods run
// one statement at a time, in the order they are called.
type Session struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// Version is what SELECT version() returned.
	Version string

	mu     sync.Mutex
	broken error // set when the process can no longer be trusted
	closed bool
}

// Dir is the directory of the Node.js package: runner.js and its
// node_modules.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate runner.js: no caller information")
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "runner.js")); err != nil {
		return "", fmt.Errorf("locate runner.js: %w", err)
	}
	return dir, nil
}

// Installed reports whether node and the chdb package are installed, with
// an error saying how to install them when they are not.
func Installed() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not installed (go run ./dev/test installs Debian's nodejs and npm): %w", err)
	}
	dir, err := Dir()
	if err != nil {
		return err
	}
	install := fmt.Sprintf("run `go run ./dev/test`, or `npm install --no-save --ignore-scripts` in %s", dir)
	for _, p := range []string{"chdb/package.json", "@chdb/lib-linux-x64-gnu/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			return fmt.Errorf("chdb is not installed in %s/node_modules (%s): %w", dir, install, err)
		}
	}
	// The lock pins chdb; an installation left from another version would
	// test another engine.
	pkg, err := os.ReadFile(filepath.Join(dir, "node_modules", "chdb", "package.json"))
	if err != nil {
		return fmt.Errorf("chdb installation: %w", err)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil {
		return fmt.Errorf("chdb installation's package.json: %w", err)
	}
	if meta.Version != ChdbVersion {
		return fmt.Errorf("chdb %s is installed in %s/node_modules, the tests pin %s (%s)", meta.Version, dir, ChdbVersion, install)
	}
	return nil
}

// ChdbVersion is the version of the npm package chdb that package.json
// and package-lock.json pin.
const ChdbVersion = "3.4.0"

// Open starts a session whose tables live in o.Dir and waits until it
// answers.
func Open(ctx context.Context, o Options) (*Session, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	data, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("chdb data directory: %w", err)
	}
	args := []string{filepath.Join(dir, "runner.js"), data}
	if o.Cluster != "" {
		conf := filepath.Join(data, "cluster.xml")
		if err := os.WriteFile(conf, []byte(fmt.Sprintf(clusterConfig, o.Cluster, o.Cluster)), 0o644); err != nil {
			return nil, fmt.Errorf("chdb cluster configuration: %w", err)
		}
		args = append(args, conf)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Stderr = o.Log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("chdb runner stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("chdb runner stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the chdb runner: %w", err)
	}
	s := &Session{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	res, err := s.Query(ctx, "SELECT version()")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("chdb session in %s: %w", data, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		s.Close()
		return nil, fmt.Errorf("chdb session in %s: SELECT version() returned %v", data, res.Rows)
	}
	s.Version = fmt.Sprint(res.Rows[0][0])
	return s, nil
}

// OpenForTest opens a session in a directory of the test and closes it
// when the test ends. What the engine writes to stderr goes to the test's
// log.
func OpenForTest(t testing.TB) *Session {
	t.Helper()
	return OpenForTestWith(t, Options{})
}

// OpenForTestWith is OpenForTest with o's settings other than Dir and Log.
func OpenForTestWith(t testing.TB, o Options) *Session {
	t.Helper()
	if err := Installed(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o.Dir, o.Log = t.TempDir(), testLog{t}
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the chdb session: %v", err)
		}
	})
	return s
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log("chdb: " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// request and response are the runner's protocol (see runner.js).
type request struct {
	SQL     string   `json:"sql,omitempty"`
	Format  string   `json:"format,omitempty"`
	Insert  string   `json:"insert,omitempty"`
	Columns []string `json:"columns,omitempty"`
	Data    string   `json:"data,omitempty"`
}

type response struct {
	OK    bool   `json:"ok"`
	Text  string `json:"text"`
	Rows  int    `json:"rows"`
	Code  int    `json:"code"`
	Error string `json:"error"`
}

// do sends one request and reads its answer. If ctx ends first, the
// process is killed: the engine cannot abandon a statement half done.
func (s *Session) do(ctx context.Context, req request) (response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return response{}, s.broken
	}
	line, err := json.Marshal(req)
	if err != nil {
		return response{}, fmt.Errorf("encode chdb request: %w", err)
	}
	type answer struct {
		resp response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		if _, err := s.stdin.Write(append(line, '\n')); err != nil {
			a.err = fmt.Errorf("send to the chdb runner: %w", err)
		} else if text, err := s.out.ReadBytes('\n'); err != nil {
			a.err = fmt.Errorf("read from the chdb runner (it exited?): %w", err)
		} else if err := json.Unmarshal(text, &a.resp); err != nil {
			a.err = fmt.Errorf("chdb runner answered %q: %w", text, err)
		}
		got <- a
	}()
	select {
	case a := <-got:
		if a.err != nil {
			s.broken = a.err
			return response{}, a.err
		}
		if !a.resp.OK {
			return response{}, &Error{Code: a.resp.Code, Message: a.resp.Error}
		}
		return a.resp, nil
	case <-ctx.Done():
		s.broken = fmt.Errorf("chdb session abandoned: %w", ctx.Err())
		_ = s.cmd.Process.Kill()
		return response{}, s.broken
	}
}

// Exec runs a statement that returns no rows.
func (s *Session) Exec(ctx context.Context, sql string) error {
	if _, err := s.do(ctx, request{SQL: sql}); err != nil {
		return fmt.Errorf("chdb: %w", err)
	}
	return nil
}

// Query runs a query and returns its rows.
func (s *Session) Query(ctx context.Context, sql string) (*Result, error) {
	resp, err := s.do(ctx, request{SQL: sql, Format: "JSONCompact"})
	if err != nil {
		return nil, fmt.Errorf("chdb: %w", err)
	}
	var doc struct {
		Meta []Column `json:"meta"`
		Data [][]any  `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(resp.Text)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("chdb: decode the result of %q: %w", sql, err)
	}
	return &Result{Columns: doc.Meta, Rows: doc.Data}, nil
}

// Insert writes data, in an input format such as JSONEachRow or
// TabSeparated, into the named columns of table, and returns how many rows
// it sent. The data travels as JSON text, so it must be valid UTF-8.
func (s *Session) Insert(ctx context.Context, table string, columns []string, format string, data []byte) (int, error) {
	if !utf8.Valid(data) {
		return 0, fmt.Errorf("chdb: insert into %s: the data is not UTF-8 text", table)
	}
	resp, err := s.do(ctx, request{Insert: table, Columns: columns, Format: format, Data: string(data)})
	if err != nil {
		return 0, fmt.Errorf("chdb: insert into %s: %w", table, err)
	}
	return resp.Rows, nil
}

// Close ends the session: the runner closes it when its stdin closes.
// After 30 s the process is killed.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	killed := s.broken != nil // a runner killed or gone exits with an error
	if s.broken == nil {
		s.broken = errors.New("chdb session closed")
	}
	_ = s.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil && !killed {
			return fmt.Errorf("chdb runner: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("chdb runner did not exit within 30 s of its input closing; killed: %w", <-exited)
	}
}
