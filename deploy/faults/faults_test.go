// Package faults injects faults into a running local stack under load and
// checks what docs/resilience.md claims: ingest answers
// 200 only for events that reach the broker, every acknowledged event ends
// up in ClickHouse exactly once after deduplication, and the content API
// keeps answering from its cache while its database is locked or down.
//
// All tests share one stack (with its content in PostgreSQL) and run one
// after another; each restarts what it stopped. Every test logs a line
// starting "figure:" with what it measured.
package faults

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/delivery"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/segmentio/kafka-go"
)

// env is what every test uses; TestMain fills it.
type env struct {
	stack *localstack.Stack
	pg    *devpostgres.Server
	ch    *chstore.Store
	logs  *logBuffer
}

// grace is the api's CONTENT_OUTAGE_GRACE here, shorter than the default
// so that the outage test can outlast it quickly.
const grace = 8 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var pg *devpostgres.Server
	return devpostgres.RunTests(testRunner(func() int {
		e, stop, err := start(pg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			return 1
		}
		defer stop()
		shared = e
		return m.Run()
	}), &pg)
}

type testRunner func() int

func (r testRunner) Run() int { return r() }

// shared is set once by TestMain before any test runs and never changed.
var shared *env

func start(pg *devpostgres.Server) (*env, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "faults-")
	if err != nil {
		return nil, nil, err
	}
	logs := &logBuffer{}
	if err := pg.CreateDatabase(ctx, "faults"); err != nil {
		return nil, nil, err
	}
	st, err := localstack.Start(ctx, localstack.Options{
		Dir: dir, Content: "../demo/content.yaml", ContentDB: pg.DSN("faults"),
		Env: map[string][]string{
			// Tokens expire from the cache within the grace, so that the
			// outage tests show them kept by the grace, not by the TTL.
			localstack.APIName:      {"CONTENT_OUTAGE_GRACE=" + grace.String(), "TOKEN_CACHE_TTL=2s"},
			localstack.ConsumerName: {"FLUSH_INTERVAL=200ms"},
		},
		Log: func(name string) io.Writer { return logs.For(name) },
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start the local stack: %w\n%s", err, logs.String())
	}
	ch, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		st.Stop()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return &env{stack: st, pg: pg, ch: ch, logs: logs}, func() {
		ch.Close()
		st.Stop()
		os.RemoveAll(dir)
	}, nil
}

// logBuffer keeps the components' output, shown when a test fails. Each
// component's tail is kept apart, so that the api's request log cannot
// crowd out the consumer's few lines.
type logBuffer struct {
	mu    sync.Mutex
	names []string
	by    map[string]*strings.Builder
}

// logTail is how much of each component's output a failure shows.
const logTail = 8000

func (l *logBuffer) For(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.by == nil {
			l.by = map[string]*strings.Builder{}
		}
		b := l.by[name]
		if b == nil {
			b = &strings.Builder{}
			l.by[name] = b
			l.names = append(l.names, name)
		}
		for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
			b.WriteString(name + ": " + line + "\n")
		}
		// Trim now and then, not on every write.
		if b.Len() > 8*logTail {
			tail := b.String()[b.Len()-logTail:]
			b.Reset()
			b.WriteString(tail)
		}
		return len(p), nil
	})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out strings.Builder
	for _, name := range l.names {
		s := l.by[name].String()
		if len(s) > logTail {
			s = "…" + s[len(s)-logTail:]
		}
		out.WriteString(s)
	}
	return out.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// startLoad sends events through the gateway at rate for the test.
func startLoad(t *testing.T, e *env, rate float64) *delivery.Load {
	t.Helper()
	runID := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + fmt.Sprint(time.Now().UnixNano())
	l, err := delivery.Start(t.Context(), delivery.Config{
		URL: "http://" + e.stack.Gateway + "/cms/app/events", Token: e.stack.Token,
		EventsPerSecond: rate, BatchSize: 20, Concurrency: 8, RunID: runID,
		RequestTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, e *env, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s\n%s", what, timeout, e.logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a condition across processes
	}
	return time.Since(start)
}

// moreAcknowledged waits until at least n more batches were acknowledged.
func moreAcknowledged(t *testing.T, e *env, l *delivery.Load, n int64, timeout time.Duration, what string) time.Duration {
	t.Helper()
	target := l.Stats().Acknowledged + n
	return waitFor(t, e, timeout, what, func() bool { return l.Stats().Acknowledged >= target })
}

// finish stops the load, waits for ClickHouse and checks that every
// acknowledged event is there exactly once after deduplication.
func finish(t *testing.T, e *env, l *delivery.Load) (delivery.Stats, delivery.Check) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := l.Stop(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, e.logs.String())
	}
	if err := l.WaitStored(ctx, e.ch.Conn(), "default"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, describeGroup(e), e.logs.String())
	}
	c, err := l.Verify(ctx, e.ch.Conn(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if !c.OK() {
		t.Errorf("ClickHouse: %s", c)
	}
	return st, c
}

// restartOnFailure starts a component the test stopped if the test ends
// early, so that the tests after it find the stack whole.
func restartOnFailure(t *testing.T, e *env, name string) {
	t.Cleanup(func() {
		if _, running := e.stack.PIDs()[name]; !running {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := e.stack.StartComponent(ctx, name); err != nil {
				t.Errorf("restart %s: %v", name, err)
			}
		} else {
			_ = e.stack.Signal(name, syscall.SIGCONT)
		}
	})
}

// describeGroup says, as the broker sees it, who is in the consumer group
// and which partitions each member holds: what a stalled consumer needs.
func describeGroup(e *env) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &kafka.Client{Addr: kafka.TCP(e.stack.Broker)}
	resp, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{"cms-clickhouse"}})
	if err != nil {
		return fmt.Sprintf("describe the consumer group: %v", err)
	}
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "group %s: state %s, error %v\n", g.GroupID, g.GroupState, g.Error)
		for _, m := range g.Members {
			fmt.Fprintf(&b, "  member %s (%s %s): %+v\n", m.MemberID, m.ClientID, m.ClientHost, m.MemberAssignments.Topics)
		}
	}
	return b.String()
}

func must(t *testing.T, e *env, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\n%s", err, e.logs.String())
	}
}
