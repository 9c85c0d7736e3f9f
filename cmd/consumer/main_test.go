package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/testcert"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

type rig struct {
	t      *testing.T
	bin    string
	dir    string // holds the binaries
	broker *devbroker.Broker
	ch     *devclickhouse.Server
	store  *chstore.Store
	// chEnv is added to the consumer's environment, after the defaults.
	chEnv []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigOn(t, devclickhouse.StartForTest(t))
}

// newRigOn starts a plain broker beside ch, builds the consumer and makes
// the events topic, as ingest would.
func newRigOn(t *testing.T, ch *devclickhouse.Server) *rig {
	t.Helper()
	r := newRigWith(t, ch, devbroker.Options{})
	w := &kafka.Client{Addr: kafka.TCP(r.broker.Addr())}
	if _, err := w.CreateTopics(t.Context(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "events", NumPartitions: 3, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// newRigWith starts a broker with opts beside ch, and builds the consumer.
func newRigWith(t *testing.T, ch *devclickhouse.Server, opts devbroker.Options) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "consumer")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	brokerBin, err := devbroker.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := devbroker.Start(ctx, brokerBin, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return &rig{t: t, bin: bin, dir: dir, broker: b, ch: ch}
}

type proc struct {
	cmd    *exec.Cmd
	url    string
	exited chan error
	logs   *lockedLog
}

// lockedLog is a process's stderr, safe to read while it runs.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the consumer; env adds or overrides variables.
func (r *rig) start(env ...string) *proc {
	r.t.Helper()
	port, err := devbroker.FreePort()
	if err != nil {
		r.t.Fatal(err)
	}
	p := &proc{url: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan error, 1), logs: &lockedLog{}}
	p.cmd = exec.Command(r.bin)
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("CONSUMER_ADDR=127.0.0.1:%d", port), "KAFKA_BROKERS="+r.broker.Addr(),
		"EVENTS_TOPIC=events", "CLICKHOUSE_ADDR="+r.ch.Addr(), "CLICKHOUSE_DATABASE=analytics",
		"BATCH_ROWS=200", "FLUSH_INTERVAL=100ms", "KAFKA_SESSION_TIMEOUT=6s", "RETRY_MAX=1s",
		// Operator endpoints on the listen address, which the tests read.
		"OPERATOR_ADDR=listen")
	p.cmd.Env = append(p.cmd.Env, r.chEnv...)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	r.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (r *rig) produce(prefix string, n int) {
	r.t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(r.broker.Addr()), Topic: "events", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		id := prefix + "-" + strconv.Itoa(i)
		msgs[i] = kafka.Message{Key: []byte(id), Value: []byte(`{"v":1,"eventId":"` + id +
			`","appId":"a","organizationId":"o","receivedAt":"2026-11-21T10:00:00.000Z","event":{"type":"REQUEST","name":"X","appId":"a"}}`)}
	}
	if err := w.WriteMessages(r.t.Context(), msgs...); err != nil {
		r.t.Fatal(err)
	}
}

// counts returns distinct event IDs and rows after deduplication; zeros
// until the consumer has created the table.
func (r *rig) counts() (distinct, final uint64) {
	if r.store == nil {
		s, err := chstore.Open(r.t.Context(), chstore.Config{Addrs: []string{r.ch.Addr()}, Database: "analytics"})
		if err != nil {
			return 0, 0
		}
		r.store = s
		r.t.Cleanup(func() { s.Close() })
	}
	ctx := r.store.Context(r.t.Context())
	_ = r.store.Conn().QueryRow(ctx, "SELECT uniqExact(event_id) FROM analytics.events").Scan(&distinct)
	_ = r.store.Conn().QueryRow(ctx, "SELECT count() FROM analytics.events FINAL").Scan(&final)
	return distinct, final
}

func (r *rig) waitDistinct(min uint64) {
	r.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if d, _ := r.counts(); d >= min {
			return
		}
		if time.Now().After(deadline) {
			d, _ := r.counts()
			r.t.Fatalf("%d distinct events after 90s, want at least %d", d, min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKilledConsumerLosesNothing kills the consumer with SIGKILL mid-stream
// twice; after restarts every event is in ClickHouse exactly once after
// deduplication.
func TestKilledConsumerLosesNothing(t *testing.T) {
	r := newRig(t)
	r.produce("a", 3000)
	p := r.start()
	r.waitDistinct(200)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	r.produce("b", 3000)
	p = r.start()
	r.waitDistinct(3200)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	r.produce("c", 3000)
	p = r.start()
	r.waitDistinct(9000)
	if d, f := r.counts(); d != 9000 || f != 9000 {
		t.Errorf("distinct %d, after deduplication %d; want 9000 and 9000", d, f)
	}
	stopCleanly(t, p)
}

func stopCleanly(t *testing.T, p *proc) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, p.logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM\n%s", p.logs)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("stopping took %s, want under 15s", took)
	}
	if !strings.Contains(p.logs.String(), `"msg":"consumer stopped"`) {
		t.Errorf("no clean-stop log line:\n%s", p.logs)
	}
}

func TestMigrateCommandAndReadiness(t *testing.T) {
	r := newRig(t)
	out, err := exec.Command(r.bin, "-clickhouse-addr", r.ch.Addr(), "-clickhouse-database", "analytics", "migrate").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "schema up to date") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	p := r.start()
	waitReady(t, p.url, p.exited)
	// The endpoints' server has header limits like every service's.
	req, err := http.NewRequest(http.MethodGet, p.url+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("b", 100<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("oversized headers: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: %d, want 431", resp.StatusCode)
	}
	stopCleanly(t, p)
}

// TestWaitsForMigrationJob starts a consumer that must not migrate
// (CLICKHOUSE_SCHEMA=wait, as beside a Kubernetes migration Job) on an
// empty database: it says what it waits for and does not serve until
// "consumer migrate" has run, then consumes.
func TestWaitsForMigrationJob(t *testing.T) {
	r := newRig(t)
	r.produce("w", 100)
	p := r.start("CLICKHOUSE_SCHEMA=wait")
	waitFor(t, 60*time.Second, "the waiting log line", func() bool {
		return strings.Contains(p.logs.String(), `waiting for the ClickHouse schema`)
	}, p)
	// Waiting, it has created nothing and opened no listener.
	if _, err := http.Get(p.url + "/healthz"); err == nil {
		t.Error("the consumer serves while it waits for the schema")
	}
	if d, _ := r.counts(); d != 0 {
		t.Errorf("%d events written before the schema was migrated", d)
	}
	out, err := exec.Command(r.bin, "-clickhouse-addr", r.ch.Addr(), "-clickhouse-database", "analytics", "migrate").CombinedOutput()
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	r.waitDistinct(100)
	if !strings.Contains(p.logs.String(), "ClickHouse schema migrated; starting") {
		t.Errorf("no log line saying the wait ended:\n%s", p.logs)
	}
	stopCleanly(t, p)
}

// TestWritesOverTLS runs the consumer against ClickHouse's secure port
// only. The certificate names localhost, not the address dialled, so the
// server name setting is what makes it verify.
func TestWritesOverTLS(t *testing.T) {
	files, err := testcert.Write(t.TempDir(), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, devclickhouse.StartForTestWith(t, devclickhouse.Options{
		TLS: &devclickhouse.TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey}}))
	other, err := testcert.Write(t.TempDir(), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	r.chEnv = []string{"CLICKHOUSE_ADDR=" + r.ch.SecureAddr(), "CLICKHOUSE_TLS_CA_FILE=" + other.CA, "CLICKHOUSE_TLS_SERVER_NAME=localhost"}
	p := r.start()
	select {
	case err := <-p.exited:
		if err == nil || !strings.Contains(p.logs.String(), "certificate could not be verified") {
			t.Errorf("with another CA: exit %v\n%s", err, p.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("with another CA: still running after 60s\n%s", p.logs)
	}

	r.chEnv = []string{"CLICKHOUSE_ADDR=" + r.ch.SecureAddr(), "CLICKHOUSE_TLS_CA_FILE=" + files.CA, "CLICKHOUSE_TLS_SERVER_NAME=localhost",
		"CLICKHOUSE_TLS_CERT_FILE=" + files.ClientCert, "CLICKHOUSE_TLS_KEY_FILE=" + files.ClientKey}
	r.produce("tls", 1000)
	p = r.start()
	waitReady(t, p.url, p.exited)
	// Counted through the plain port of the same server.
	r.waitDistinct(1000)
	if d, f := r.counts(); d != 1000 || f != 1000 {
		t.Errorf("distinct %d, after deduplication %d; want 1000 and 1000", d, f)
	}
	stopCleanly(t, p)
}

func TestSchemaModeRefusesUnknown(t *testing.T) {
	t.Setenv("CLICKHOUSE_SCHEMA", "later")
	if err := run(nil); err == nil || !strings.Contains(err.Error(), `ClickHouse schema mode "later": want apply or wait`) {
		t.Errorf("CLICKHOUSE_SCHEMA=later: %v", err)
	}
}

func TestHistoryDaysRefusesNone(t *testing.T) {
	t.Setenv("HISTORY_DAYS", "0")
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "-history-days (HISTORY_DAYS) 0: want 1 or more") {
		t.Errorf("HISTORY_DAYS=0: %v", err)
	}
}

func TestEventTimeWindowRefusesNone(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"EVENT_TIME_MAX_FUTURE", "0s", "-event-time-max-future (EVENT_TIME_MAX_FUTURE) 0s and -event-time-max-past (EVENT_TIME_MAX_PAST) 168h0m0s: want both positive"},
		{"EVENT_TIME_MAX_PAST", "-1h", "-event-time-max-future (EVENT_TIME_MAX_FUTURE) 5m0s and -event-time-max-past (EVENT_TIME_MAX_PAST) -1h0m0s: want both positive"},
		{"EVENT_TIME_MAX_PAST", "a week", `EVENT_TIME_MAX_PAST="a week": not a duration`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			if err := run(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%s: %v, want an error containing %q", tc.env, tc.value, err, tc.want)
			}
		})
	}
	if err := run([]string{"block-suggestion", "-app", "shop", "-query", "x", "extra"}); err == nil ||
		!strings.Contains(err.Error(), "block-suggestion: want -app A [-channel C] -query TEXT") {
		t.Errorf("block-suggestion with an argument: %v", err)
	}
	if err := run([]string{"replay"}); err == nil || !strings.Contains(err.Error(), "the commands are migrate, forget-user, block-suggestion, unblock-suggestion and blocked-suggestions") {
		t.Errorf("an unknown command: %v", err)
	}
}

// waitFor polls cond until it holds, failing with the process's log after
// limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, p *proc) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s\n%s", what, limit, p.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHTTPLimitFlagsRefuseNoLimit checks that the consumer does not start
// with a limit net/http would read as none at all.
func TestHTTPLimitFlagsRefuseNoLimit(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"HTTP_READ_TIMEOUT", "0s", "-read-timeout 0s: must be positive"},
		{"HTTP_WRITE_TIMEOUT", "-1s", "-write-timeout -1s: must be positive"},
		{"HTTP_MAX_HEADER_BYTES", "10", "-max-header-bytes 10: must be at least 1024"},
		{"HTTP_IDLE_TIMEOUT", "soon", `HTTP_IDLE_TIMEOUT="soon": not a duration`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			if err := run(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%s: %v, want an error containing %q", tc.env, tc.value, err, tc.want)
			}
		})
	}
}

// TestMigrateCommandOnACluster runs "consumer migrate" as a migration job
// would, configured by the environment, twice at once against two servers
// of a cluster, then again.
func TestMigrateCommandOnACluster(t *testing.T) {
	c := devclickhouse.StartClusterForTest(t)
	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	migrate := func(s *devclickhouse.Server) (string, error) {
		cmd := exec.Command(bin, "migrate")
		cmd.Env = append(os.Environ(), "CLICKHOUSE_ADDR="+s.Addr(), "CLICKHOUSE_DATABASE=analytics", "CLICKHOUSE_CLUSTER="+c.Name)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	outs := make([]string, 2)
	errs := make([]error, 2)
	done := make(chan int)
	for i, s := range []*devclickhouse.Server{c.Shards[0][0], c.Shards[1][1]} {
		go func() { outs[i], errs[i] = migrate(s); done <- i }()
	}
	<-done
	<-done
	for i := range outs {
		if errs[i] != nil || !strings.Contains(outs[i], "schema up to date") || !strings.Contains(outs[i], `"cluster":"`+c.Name+`"`) {
			t.Fatalf("migrate %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	out, err := migrate(c.Shards[1][0])
	if err != nil || !strings.Contains(out, `"applied":null`) {
		t.Fatalf("migrate again: %v\n%s", err, out)
	}
	s, err := chstore.Open(t.Context(), chstore.Config{Addrs: []string{c.Shards[0][1].Addr()}, Database: "analytics", Cluster: c.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var engine string
	if err := s.Conn().QueryRow(t.Context(), "SELECT engine FROM system.tables WHERE database = 'analytics' AND name = 'events'").Scan(&engine); err != nil || engine != "Distributed" {
		t.Errorf("events on another server: engine %q, %v", engine, err)
	}
	// A name the servers do not know fails at once, saying so.
	cmd := exec.Command(bin, "migrate")
	cmd.Env = append(os.Environ(), "CLICKHOUSE_ADDR="+c.Shards[0][0].Addr(), "CLICKHOUSE_CLUSTER=nosuch")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `no cluster "nosuch"`) {
		t.Errorf("migrate with an unknown cluster: %v\n%s", err, out)
	}
}
