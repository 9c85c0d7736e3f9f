package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/testcert"
)

// TestSecuredKafka runs ingest against a broker that takes only TLS with
// a client certificate and SASL SCRAM-SHA-512. With the wrong password it
// never becomes ready and says that authentication failed; with the right
// one (from a file, as a mounted secret) it accepts events, and when the
// broker stops taking the password it turns not ready, saying why. The
// password never appears in what it prints.
func TestSecuredKafka(t *testing.T) {
	const right, wrong, rotated = "ingest-r1ght-s3cret", "ingest-wr0ng-s3cret", "ingest-n3w-s3cret"
	certs := testcert.New(t, "127.0.0.1", "localhost")
	opts := func(pass string) devbroker.Options {
		return devbroker.Options{DataDir: t.TempDir(), TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSClientCAFile: certs.CA,
			SASLUsers: []devbroker.SASLUser{{Mechanism: "SCRAM-SHA-512", Name: "ingest", Password: pass}}}
	}
	secret := func(pass string) string {
		f := filepath.Join(t.TempDir(), "password")
		if err := os.WriteFile(f, []byte(pass+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	env := func(passFile string) []string {
		return []string{"KAFKA_TLS_CA_FILE=" + certs.CA, "KAFKA_TLS_CERT_FILE=" + certs.ClientCert, "KAFKA_TLS_KEY_FILE=" + certs.ClientKey,
			"KAFKA_TLS_SERVER_NAME=localhost", "KAFKA_SASL_MECHANISM=scram-sha-512", "KAFKA_SASL_USERNAME=ingest", "KAFKA_SASL_PASSWORD_FILE=" + passFile}
	}
	noSecrets := func(t *testing.T, logs string) {
		t.Helper()
		for _, pass := range []string{right, wrong, rotated} {
			if strings.Contains(logs, pass) {
				t.Errorf("the log shows a password:\n%s", logs)
			}
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		p := launchIngest(t, opts(right), env(secret(wrong))...)
		deadline := time.Now().Add(30 * time.Second)
		for p.running() {
			if resp, err := http.Get(p.base + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					t.Fatalf("ready with the wrong password\n%s", p.logs.String())
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("still running 30s after start with the wrong password\n%s", p.logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		logs := p.logs.String()
		t.Logf("exit %v:\n%s", p.err, logs)
		if p.err == nil || !strings.Contains(logs, `authentication to Kafka failed: the brokers refused SASL SCRAM-SHA-512 user "ingest"`) {
			t.Errorf("exit %v; want a failure naming the authentication:\n%s", p.err, logs)
		}
		noSecrets(t, logs)
	})

	t.Run("right password", func(t *testing.T) {
		p := launchIngest(t, opts(right), env(secret(right))...)
		p.waitReady(t)
		req, _ := http.NewRequest(http.MethodPut, p.base+"/cms/app/events", strings.NewReader(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s"}]}`))
		req.Header.Set("Authorization", "Bearer "+p.tokens["a"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":1`) {
			t.Fatalf("PUT over TLS and SASL: %d %s\n%s", resp.StatusCode, body, p.logs.String())
		}
		if logs := p.logs.String(); !strings.Contains(logs, `"sasl_mechanism":"SCRAM-SHA-512","sasl_username":"ingest"`) ||
			!strings.Contains(logs, `"tls":true,"tls_server_name":"localhost"`) {
			t.Errorf("the start-up log does not say what security is in use:\n%s", logs)
		}

		// The broker comes back with another password: ingest turns not
		// ready and says why.
		if err := p.broker.Stop(); err != nil {
			t.Fatal(err)
		}
		o := opts(rotated)
		o.Port = brokerPort(t, p.broker)
		b, err := devbroker.Start(t.Context(), brokerBin, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Stop() })
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var last string
		for {
			resp, err := http.Get(p.op + "/readyz")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = string(b)
				if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(last, "authentication to Kafka failed") {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("readiness after the password changed: %s\n%s", last, p.logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		noSecrets(t, p.logs.String()+last)
		// The listen address, which clients reach, names the failing
		// check but not its error.
		resp, err = http.Get(p.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(b2), "authentication") || strings.Contains(string(b2), "127.0.0.1") ||
			!strings.Contains(string(b2), `"kafka":"failing (details on the operator address and in the log)"`) {
			t.Errorf("readiness on the listen address: %d %s", resp.StatusCode, b2)
		}
	})
}

// brokerPort is the port the broker listens on.
func brokerPort(t *testing.T, b *devbroker.Broker) int {
	t.Helper()
	_, port, err := net.SplitHostPort(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
