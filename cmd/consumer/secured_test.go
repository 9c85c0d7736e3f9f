package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/testcert"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// TestSecuredKafkaEndToEnd runs ingest and the consumer against a broker
// that takes only TLS with a client certificate and SASL SCRAM-SHA-256.
// With the wrong password the consumer never becomes ready and says that
// authentication failed; with the right one (from files, as mounted
// secrets) events PUT to ingest reach ClickHouse exactly once. No
// password appears in what either prints.
func TestSecuredKafkaEndToEnd(t *testing.T) {
	const right, wrong = "cms-r1ght-s3cret", "cms-wr0ng-s3cret"
	certs := testcert.New(t, "127.0.0.1", "localhost")
	r := newRigWith(t, devclickhouse.StartForTest(t), devbroker.Options{DataDir: t.TempDir(), TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey,
		TLSClientCAFile: certs.CA, SASLUsers: []devbroker.SASLUser{{Mechanism: "SCRAM-SHA-256", Name: "cms", Password: right}}})
	secret := func(pass string) string {
		f := filepath.Join(t.TempDir(), "password")
		if err := os.WriteFile(f, []byte(pass+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	env := func(pass string) []string {
		return []string{"KAFKA_TLS_CA_FILE=" + certs.CA, "KAFKA_TLS_CERT_FILE=" + certs.ClientCert, "KAFKA_TLS_KEY_FILE=" + certs.ClientKey,
			"KAFKA_SASL_MECHANISM=SCRAM-SHA-256", "KAFKA_SASL_USERNAME=cms", "KAFKA_SASL_PASSWORD_FILE=" + secret(pass)}
	}
	noSecrets := func(t *testing.T, logs string) {
		t.Helper()
		if strings.Contains(logs, right) || strings.Contains(logs, wrong) {
			t.Errorf("the log shows a password:\n%s", logs)
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		p := r.start(env(wrong)...)
		deadline := time.Now().Add(60 * time.Second)
		var exit error
	wait:
		for {
			if resp, err := http.Get(p.url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					t.Fatal("ready with the wrong password")
				}
			}
			select {
			case exit = <-p.exited:
				break wait
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("still running 60s after start with the wrong password")
			}
		}
		logs := p.logs.String()
		if exit == nil || !strings.Contains(logs, `authentication to Kafka failed: the brokers refused SASL SCRAM-SHA-256 user "cms"`) {
			t.Errorf("exit %v; want a failure naming the authentication:\n%s", exit, logs)
		}
		noSecrets(t, logs)
	})

	t.Run("right password", func(t *testing.T) {
		// A quarantine topic made by hand that no acks=all write can
		// satisfy: both commands report it.
		createRiskyTopic(t, r.broker.Addr(), certs, "cms", right, "cms.events.quarantine")
		c := r.start(env(right)...)
		waitReady(t, c.url, c.exited)
		ingest := r.startIngest(t, env(right)...)
		const n = 100
		var events []string
		for i := range n {
			events = append(events, fmt.Sprintf(`{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s%d"}`, i))
		}
		req, _ := http.NewRequest(http.MethodPut, ingest.url+"/cms/app/events", strings.NewReader(`{"events":[`+strings.Join(events, ",")+`]}`))
		req.Header.Set("Authorization", "Bearer "+ingest.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprintf(`"accepted":%d`, n)) {
			t.Fatalf("PUT: %d %s", resp.StatusCode, body)
		}
		r.waitDistinct(n)
		if d, f := r.counts(); d != n || f != n {
			t.Errorf("distinct %d, after deduplication %d; want %d and %d", d, f, n, n)
		}
		for _, url := range []string{c.url, ingest.url} {
			const risk = `cms_kafka_topic_durability_risk{reason="min_insync_above_replication",topic="cms.events.quarantine"} 1`
			if m := metrics(t, url); !strings.Contains(m, risk) {
				t.Errorf("%s/metrics lacks %s", url, risk)
			}
		}
		stopCleanly(t, c)
		if err := ingest.proc.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		<-ingest.proc.exited
		for name, logs := range map[string]string{"consumer": c.logs.String(), "ingest": ingest.proc.logs.String()} {
			if !strings.Contains(logs, `"tls":true`) || !strings.Contains(logs, `"sasl_mechanism":"SCRAM-SHA-256","sasl_username":"cms"`) {
				t.Errorf("%s: the start-up log does not say what security is in use:\n%s", name, logs)
			}
			if !strings.Contains(logs, `"topic":"cms.events.quarantine","setting":"min.insync.replicas","value":"2","reason":"min_insync_above_replication"`) {
				t.Errorf("%s: no warning of the quarantine topic's min.insync.replicas:\n%s", name, logs)
			}
			noSecrets(t, logs)
		}
	})
}

func waitReady(t *testing.T, url string, exited chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ingestProc is the ingest binary with a content database holding one
// app and its token.
type ingestProc struct {
	proc  *proc
	url   string
	token string
}

// startIngest builds and runs ingest against the rig's broker, writing to
// the topic the consumer reads; env adds variables. It returns once ingest
// is ready.
func (r *rig) startIngest(t *testing.T, env ...string) *ingestProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := childproc.GoBuild(ctx, r.dir, "./cmd/ingest"); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "cms.db")
	store, err := tenancydb.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, id, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		store.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "o", Name: "o", CreatedAt: now}),
		store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "a", OrganizationID: "o", Name: "a", CreatedAt: now, UpdatedAt: now}),
		store.CreateToken(contenttest.Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: id, Hash: auth.HashToken(tok), OrganizationID: "o", AppID: "a", CreatedAt: now}),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	store.Close()
	port, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := &proc{url: url, exited: make(chan error, 1), logs: &lockedLog{}}
	p.cmd = exec.Command(filepath.Join(r.dir, "ingest"))
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("INGEST_ADDR=127.0.0.1:%d", port), "KAFKA_BROKERS="+r.broker.Addr(), "CONTENT_DB="+db,
		"EVENTS_TOPIC=events", "TOPIC_PARTITIONS=3", "KAFKA_BATCH_TIMEOUT=5ms", "OPERATOR_ADDR=listen")
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	waitReady(t, url, p.exited)
	return &ingestProc{proc: p, url: url, token: tok}
}

func metrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// createRiskyTopic makes topic with one replica and min.insync.replicas 2
// through the secured listener, with a client of its own.
func createRiskyTopic(t *testing.T, addr string, certs testcert.Files, user, pass, topic string) {
	t.Helper()
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	mech, err := scram.Mechanism(scram.SHA256, user, pass)
	if err != nil {
		t.Fatal(err)
	}
	tr := &kafka.Transport{TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}, SASL: mech}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr, Timeout: 10 * time.Second}
	resp, err := cl.CreateTopics(t.Context(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: "2"}}}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}
