package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// The ingest and broker binaries are built once for the package by
// TestMain; tests run them as processes, so that what they measure
// (exit codes, memory) belongs to the process itself.
var ingestBin, brokerBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cms-ingest-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := childproc.GoBuild(ctx, dir, "./cmd/ingest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ingestBin = filepath.Join(dir, "ingest")
	return devbroker.RunTests(m, &brokerBin)
}

// ingestProc is the ingest binary running against its own broker process
// and content database, which holds organization "o" with apps "a" and
// "b", an app token for each and an organization token.
type ingestProc struct {
	base   string // http://host:port
	addr   string
	op     string            // the operator address's http://host:port
	tokens map[string]string // "a", "b", "org" -> token
	broker *devbroker.Broker
	cmd    *exec.Cmd
	logs   *childproc.Output
	done   chan struct{} // closed when the process has exited
	err    error         // the exit, once done is closed
}

// startIngest runs the binary configured through the environment only;
// env adds or overrides variables. It returns once /readyz answers 200.
func startIngest(t *testing.T, env ...string) *ingestProc {
	t.Helper()
	p := launchIngest(t, devbroker.Options{}, env...)
	p.waitReady(t)
	return p
}

// launchIngest starts the binary against a broker started with opts and
// returns at once.
func launchIngest(t *testing.T, opts devbroker.Options, env ...string) *ingestProc {
	t.Helper()
	ctx := t.Context()
	broker, err := devbroker.Start(ctx, brokerBin, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Stop() })

	dir := t.TempDir()
	db := filepath.Join(dir, "cms.db")
	store, err := tenancydb.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := &ingestProc{broker: broker, tokens: map[string]string{}, logs: &childproc.Output{}, done: make(chan struct{})}
	steps := []error{
		store.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "o", Name: "o", CreatedAt: now}),
		store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "a", OrganizationID: "o", Name: "a", CreatedAt: now, UpdatedAt: now}),
		store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "b", OrganizationID: "o", Name: "b", CreatedAt: now, UpdatedAt: now}),
	}
	for name, app := range map[string]string{"a": "a", "b": "b", "org": ""} {
		tok, id, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		p.tokens[name] = tok
		steps = append(steps, store.CreateToken(contenttest.Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: id, Hash: auth.HashToken(tok), OrganizationID: "o", AppID: app, CreatedAt: now}))
	}
	for _, step := range steps {
		if step != nil {
			t.Fatal(step)
		}
	}
	store.Close()

	port, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p.addr = fmt.Sprintf("127.0.0.1:%d", port)
	p.base = "http://" + p.addr
	opPort, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p.op = fmt.Sprintf("http://127.0.0.1:%d", opPort)
	p.cmd = exec.Command(ingestBin)
	p.cmd.Env = append(os.Environ(), "INGEST_ADDR="+p.addr, "KAFKA_BROKERS="+broker.Addr(), "CONTENT_DB="+db,
		"EVENTS_TOPIC=bin-events", "QUARANTINE_TOPIC=bin-quarantine", "TOPIC_PARTITIONS=2", "SHUTDOWN_TIMEOUT=10s",
		fmt.Sprintf("OPERATOR_ADDR=127.0.0.1:%d", opPort))
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitReady returns once /readyz answers 200.
func (p *ingestProc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("ingest exited before it was ready: %v\n%s", p.err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running reports whether the process is still alive.
func (p *ingestProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// TestBinaryServesAndStopsOnSIGTERM runs the built binary configured only
// through environment variables, against the broker process, and checks
// that SIGTERM ends it cleanly within the shutdown timeout.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	p := startIngest(t)
	req, _ := http.NewRequest(http.MethodPut, p.base+"/cms/app/events", strings.NewReader(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s"}]}`))
	req.Header.Set("Authorization", "Bearer "+p.tokens["a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":1`) {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	metrics, err := http.Get(p.op + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(mb), `cms_ingest_events_total{outcome="accepted"} 1`) {
		t.Errorf("metrics do not count the accepted event")
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", p.err, p.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", p.logs.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	if !strings.Contains(p.logs.String(), `"msg":"ingest stopped"`) {
		t.Errorf("no clean-stop log line:\n%s", p.logs.String())
	}
}

func TestBadConfigurationFails(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"bad log level", []string{"-log-level", "loud"}, "", "log level"},
		{"bad duration env", nil, "PRODUCE_TIMEOUT=soon", "PRODUCE_TIMEOUT"},
		{"bad timeout env", nil, "HTTP_READ_HEADER_TIMEOUT=soon", `HTTP_READ_HEADER_TIMEOUT="soon": not a duration`},
		{"bad timeout in a former variable", nil, "READ_HEADER_TIMEOUT=soon", `READ_HEADER_TIMEOUT="soon": not a duration`},
		{"no read limit in a former variable", nil, "READ_TIMEOUT=0s", "-read-timeout 0s: must be positive"},
		{"no idle limit in a former variable", nil, "IDLE_TIMEOUT=-1s", "-idle-timeout -1s: must be positive"},
		{"tiny header limit", nil, "HTTP_MAX_HEADER_BYTES=100", "-max-header-bytes 100: must be at least 1024"},
		{"write timeout within the produce timeout", []string{"-produce-timeout", "8s"}, "HTTP_WRITE_TIMEOUT=8s", "write timeout 8s must be longer than the produce timeout 8s"},
		{"unknown flag", []string{"-nope"}, "", "flag provided but not defined"},
		{"CORS origin with a path", nil, "CORS_ALLOWED_ORIGINS=https://app.example.com,https://chat.example.com/", `CORS_ALLOWED_ORIGINS): allowed origin "https://chat.example.com/": a path ("/") is not part of an origin`},
		{"CORS origin without a scheme", []string{"-cors-allowed-origins", "app.example.com"}, "", `allowed origin "app.example.com": no scheme`},
		{"events larger than a record", nil, "MAX_EVENT_BYTES=9000000", "cannot hold an event of 9000000 bytes in its envelope; allow records of at least 9004096"},
		{"records larger than the topics take", []string{"-kafka-max-message-bytes", "1048576"}, "", "KAFKA_MAX_MESSAGE_BYTES"},
		{"a body the memory budget cannot hold", nil, "MAX_BODY_MEMORY=50000000", "MAX_BODY_MEMORY 50000000 cannot hold a body of MAX_DECOMPRESSED_BYTES 16777216 of MAX_EVENTS 25000 events"},
		{"a body an app's share of the memory cannot hold", []string{"-max-body-memory-per-app", "30000000"}, "",
			"MAX_BODY_MEMORY_PER_APP 30000000 cannot hold a body of MAX_BODY_BYTES 10485760 of MAX_EVENTS 25000 events (44060675 bytes with the records built from it); raise it or lower MAX_BODY_BYTES or MAX_EVENTS"},
		{"a body a token's share of the memory cannot hold", nil, "MAX_BODY_MEMORY_PER_TOKEN=30000000",
			"MAX_BODY_MEMORY_PER_TOKEN 30000000 cannot hold a body of MAX_BODY_BYTES 10485760 of MAX_EVENTS 25000 events (44060675 bytes with the records built from it); raise it or lower MAX_BODY_BYTES or MAX_EVENTS"},
		{"a body an organization's share of the memory cannot hold", []string{"-max-body-memory-per-org", "50000000"}, "",
			"MAX_BODY_MEMORY_PER_ORG 50000000 cannot hold a body of MAX_DECOMPRESSED_BYTES 16777216 of MAX_EVENTS 25000 events"},
		{"more events than an app's share of the memory holds", []string{"-max-events", "100000", "-max-body-memory-per-app", "67108864"}, "",
			"MAX_BODY_MEMORY_PER_APP 67108864 cannot hold a body of MAX_BODY_BYTES 10485760 of MAX_EVENTS 100000 events"},
		{"an event burst below the most events", nil, "EVENT_BURST_PER_APP=1000",
			"EVENT_BURST_PER_APP 1000 cannot hold a batch of MAX_EVENTS 25000 events, which would never pass; raise it or lower MAX_EVENTS"},
		{"an event rate that is not a number", []string{"-event-rate-per-org", "fast"}, "", "event-rate-per-org"},
		{"a share that is not a number", nil, "MAX_IN_FLIGHT_PER_ORG=half", "MAX_IN_FLIGHT_PER_ORG"},
		{"SASL without a password", []string{"-kafka-sasl-mechanism", "SCRAM-SHA-256", "-kafka-sasl-username", "u"}, "",
			"the Kafka SASL mechanism SCRAM-SHA-256 needs a password (KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE)"},
		{"SASL password file missing", []string{"-kafka-sasl-mechanism", "PLAIN"}, "KAFKA_SASL_PASSWORD_FILE=/nonexistent/password",
			`KAFKA_SASL_PASSWORD_FILE="/nonexistent/password": read the secret file: no such file or directory`},
		{"TLS certificate without its key", []string{"-kafka-tls-cert-file", "/etc/client.pem"}, "",
			`the Kafka TLS client certificate "/etc/client.pem" (KAFKA_TLS_CERT_FILE) needs its key (KAFKA_TLS_KEY_FILE)`},
		{"unknown SASL mechanism", nil, "KAFKA_SASL_MECHANISM=OAUTHBEARER", `unknown Kafka SASL mechanism "OAUTHBEARER"`},
		{"min.insync.replicas above replication", []string{"-topic-replication", "2"}, "TOPIC_MIN_INSYNC_REPLICAS=3",
			"min.insync.replicas 3 (TOPIC_MIN_INSYNC_REPLICAS) exceeds its replication factor 2 (TOPIC_REPLICATION)"},
		{"a trusted proxy that is not a network", nil, "TRUSTED_PROXIES=10.0.0.0/8,gateway", `-trusted-proxies (TRUSTED_PROXIES): trusted proxy 2, "gateway": want a network such as 10.0.0.0/8 or an address`},
		{"unknown command", []string{"replay"}, "", `unknown command "replay"`},
		{"resubmit with a bad time", []string{"resubmit", "-since", "yesterday"}, "", `-since "yesterday": want an RFC 3339 time`},
		{"resubmit with an argument", []string{"resubmit", "all"}, "", "resubmit takes no arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				k, v, _ := strings.Cut(tc.env, "=")
				t.Setenv(k, v)
			}
			err := run(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%v) = %v, want an error about %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestOperatorAddress runs the binary with OPERATOR_ADDR: /metrics and the
// profiles answer there only, the listen address answers them 404, and
// health answers on both.
func TestOperatorAddress(t *testing.T) {
	p := startIngest(t)
	op := p.op
	for _, tc := range []struct {
		url  string
		want int
		has  string
	}{
		{p.base + "/metrics", http.StatusNotFound, "served on the operator address"},
		{p.base + "/debug/pprof/", http.StatusNotFound, "served on the operator address"},
		{op + "/metrics", http.StatusOK, "cms_ingest_events_total"},
		{op + "/debug/pprof/", http.StatusOK, "goroutine"},
		{p.base + "/readyz", http.StatusOK, "ready"},
		{op + "/readyz", http.StatusOK, "ready"},
		{op + "/cms/app/events", http.StatusNotFound, "not served on the operator address"},
	} {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.has) {
			t.Errorf("GET %s: %d %.200s, want %d with %q", tc.url, resp.StatusCode, b, tc.want, tc.has)
		}
	}
}
