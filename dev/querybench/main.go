// Command querybench measures what analysts' queries cost on a large events
// table, in a rollup's form against a raw table's:
//
//	go run ./dev/querybench [-events 10000000] [-runs 7]
//
// It starts a private ClickHouse 18.16 server, applies the product's
// migrations, fills events with generated conversations of a handful of
// apps over 30 days (server-side, with INSERT ... SELECT in chunks, so that
// the materialized views fill the rollups as the consumer's inserts do),
// then runs each form of each query -runs times and prints, as a markdown
// table, the rows each read (from system.query_log) and its median, min
// and max wall time. It fails if the two forms of a query answer
// differently.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// queryLogConfig turns on system.query_log, where rows read are taken
// from: the private server's configuration has none.
const queryLogConfig = `    <query_log>
        <database>system</database>
        <table>query_log</table>
        <flush_interval_milliseconds>1000</flush_interval_milliseconds>
    </query_log>
`

// options are the benchmark's size and repetitions.
type options struct {
	events, chunk, runs, days int
	// log, when set, reports progress.
	log *slog.Logger
}

// redelivered is how many of the first events are written twice.
func (o options) redelivered() int {
	return min(o.events, max(o.events/200, 1000))
}

func (o options) progress(msg string, args ...any) {
	if o.log != nil {
		o.log.Info(msg, args...)
	}
}

func (o options) check() error {
	switch {
	case o.events <= 0:
		return errors.New("-events must be positive")
	case o.chunk <= 0 || o.chunk%16 != 0:
		// Sessions are cut from blocks of 16 events; a chunk of whole
		// blocks keeps every session within one insert.
		return errors.New("-chunk must be a positive multiple of 16")
	case o.runs <= 0:
		return errors.New("-runs must be positive")
	case o.days <= 1:
		return errors.New("-days must be at least 2")
	}
	return nil
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 10_000_000, "events to fill the table with")
	flag.IntVar(&o.chunk, "chunk", 1_000_000, "events per INSERT ... SELECT (a multiple of 16)")
	flag.IntVar(&o.runs, "runs", 7, "runs of each query form")
	flag.IntVar(&o.days, "days", 30, "days the events span, ending now (ending yesterday in the first six hours of a UTC day)")
	flag.Parse()
	o.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		o.log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, o options) error {
	if err := o.check(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cms-querybench-*")
	if err != nil {
		return fmt.Errorf("create the server's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := devclickhouse.Install(ctx, os.Stderr); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "ch"), 0o755); err != nil {
		return fmt.Errorf("create the server's directory: %w", err)
	}
	srv, err := devclickhouse.Start(ctx, devclickhouse.Options{Dir: filepath.Join(dir, "ch"), Config: queryLogConfig})
	if err != nil {
		return err
	}
	defer srv.Stop()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		return err
	}
	defer s.Close()
	rep, err := benchmark(ctx, s, "default", o)
	if err != nil {
		return err
	}
	rep.print(out)
	return rep.agreement()
}

// benchmark migrates the database, fills it and measures every query form.
func benchmark(ctx context.Context, s *chstore.Store, db string, o options) (*report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if _, err := s.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var version string
	if err := s.Conn().QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return nil, fmt.Errorf("read the server version: %w", err)
	}
	w := newWindow(time.Now(), o.days)
	o.progress("filling events", "events", o.events, "per_insert", o.chunk)
	filled, err := fill(ctx, s, db, w, o)
	if err != nil {
		return nil, err
	}
	o.progress("filled", "took", filled.took.Round(time.Millisecond))
	if err := settle(ctx, s, 5*time.Minute); err != nil {
		return nil, err
	}
	rep := &report{version: version, fill: filled, days: o.days, runs: o.runs}
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = ? AND table = 'events' AND active",
		db).Scan(&rep.parts); err != nil {
		return nil, fmt.Errorf("count the parts of events: %w", err)
	}
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".events").Scan(&rep.rows); err != nil {
		return nil, fmt.Errorf("count the rows of events: %w", err)
	}
	if err := s.Conn().QueryRow(ctx, "SELECT sum(rows), count() FROM system.parts WHERE database = ? AND table = 'app_daily' AND active",
		db).Scan(&rep.rollupRows, &rep.rollupParts); err != nil {
		return nil, fmt.Errorf("count the rows of app_daily: %w", err)
	}
	for i, col := range []string{"conversations", "users", "turns"} {
		if err := s.Conn().QueryRow(ctx, "SELECT data_uncompressed_bytes FROM system.columns WHERE database = ? AND table = 'app_daily' AND name = ?",
			db, col).Scan(&rep.stateBytes[i]); err != nil {
			return nil, fmt.Errorf("read the size of app_daily.%s: %w", col, err)
		}
	}
	sess, err := pickSession(ctx, s, db, o)
	if err != nil {
		return nil, err
	}
	rep.session = sess
	o.progress("measuring", "runs", o.runs, "session", sess)
	rep.load[0] = loadAverage()
	if err := measure(ctx, s, db, o, rep); err != nil {
		return nil, err
	}
	rep.load[1] = loadAverage()
	return rep, nil
}

// loadAverage is the one-minute load average, which tells whether other
// work shared the cores with the measured queries.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// machine describes where the benchmark ran.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %d GiB", (kb+1<<19)>>20)
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s", cpu, runtime.NumCPU(), mem)
}
