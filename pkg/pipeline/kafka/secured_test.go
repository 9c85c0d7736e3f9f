package kafka

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/testcert"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// securedBroker runs the development broker over TLS, requiring client
// certificates, with one SASL user per mechanism; users maps each
// mechanism to its user and password.
func securedBroker(t testing.TB) (*devbroker.Broker, testcert.Files, map[string]SASL) {
	t.Helper()
	certs := testcert.New(t, "127.0.0.1", "localhost", "kafka.test")
	users := map[string]SASL{
		SASLPlain:       {Mechanism: SASLPlain, Username: "plain-user", Password: "plain-s3cret"},
		SASLScramSHA256: {Mechanism: SASLScramSHA256, Username: "scram256-user", Password: "scram256-s3cret"},
		SASLScramSHA512: {Mechanism: SASLScramSHA512, Username: "scram512-user", Password: "scram512-s3cret"},
	}
	o := devbroker.Options{DataDir: t.TempDir(), TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, TLSClientCAFile: certs.CA}
	for _, u := range users {
		o.SASLUsers = append(o.SASLUsers, devbroker.SASLUser{Mechanism: u.Mechanism, Name: u.Username, Password: u.Password})
	}
	b, err := devbroker.Start(t.Context(), brokerBin, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b, certs, users
}

// BenchmarkSecuredWrite measures what TLS and SASL cost the producer:
// batches of 1000 records of 512 bytes, acks=all, to the development
// broker in plaintext and over TLS with a client certificate and SASL
// PLAIN or SCRAM-SHA-512.
func BenchmarkSecuredWrite(b *testing.B) {
	plain, err := devbroker.Start(b.Context(), brokerBin, devbroker.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = plain.Stop() })
	secured, certs, users := securedBroker(b)
	tlsCfg := TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	recs := make([]event.Record, 1000)
	for i := range recs {
		recs[i] = event.Record{Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte("x"), 512)}
	}
	for _, bc := range []struct {
		name string
		cl   Cluster
	}{
		{"plaintext", Cluster{Brokers: []string{plain.Addr()}}},
		{"TLS+PLAIN", Cluster{Brokers: []string{secured.Addr()}, TLS: tlsCfg, SASL: users[SASLPlain]}},
		{"TLS+SCRAM-SHA-512", Cluster{Brokers: []string{secured.Addr()}, TLS: tlsCfg, SASL: users[SASLScramSHA512]}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			topic := "bench-" + strings.ReplaceAll(bc.name, "+", "-")
			if err := bc.cl.EnsureTopics(b.Context(), []TopicSpec{{Name: topic, Partitions: 6, ReplicationFactor: 1}}); err != nil {
				b.Fatal(err)
			}
			w, err := bc.cl.NewWriter(ProducerConfig{BatchTimeout: time.Millisecond, Compression: "none"}, topic)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			b.SetBytes(int64(len(recs) * 512))
			b.ResetTimer()
			for b.Loop() {
				if err := w.Write(b.Context(), recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestSecuredClients runs every client the services build (topic
// administration, the producer, the group reader, the dead-letter writer)
// against a broker that takes only TLS with a client certificate and SASL,
// once per mechanism.
func TestSecuredClients(t *testing.T) {
	b, certs, users := securedBroker(t)
	tlsCfg := TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cl := Cluster{Brokers: []string{b.Addr()}, TLS: tlsCfg, SASL: users[mech]}
			events, quarantine, dead := "ev-"+mech, "q-"+mech, "dl-"+mech
			specs := []TopicSpec{{Name: events, Partitions: 2, ReplicationFactor: 1}, {Name: quarantine, Partitions: 1, ReplicationFactor: 1},
				{Name: dead, Partitions: 1, ReplicationFactor: 1}}
			if err := cl.EnsureTopics(ctx, specs); err != nil {
				t.Fatalf("EnsureTopics: %v", err)
			}
			if err := cl.CheckTopics(ctx, []string{events, quarantine, dead}); err != nil {
				t.Fatalf("CheckTopics: %v", err)
			}
			p, err := cl.NewProducer(ProducerConfig{BatchTimeout: time.Millisecond}, events, quarantine)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.Publish(ctx, []event.Record{{Key: []byte("k1"), Value: []byte("accepted-1")}, {Key: []byte("k2"), Value: []byte("accepted-2")}},
				[]event.Record{{Key: []byte("k3"), Value: []byte("quarantined-1")}}); err != nil {
				t.Fatalf("Publish: %v", err)
			}

			r, err := cl.NewGroupReader(readerConfig("g-"+mech, events, quarantine))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := fetch(t, r, 3)
			for _, v := range []string{"accepted-1", "accepted-2", "quarantined-1"} {
				if _, ok := got[v]; !ok {
					t.Errorf("the group reader did not read %q; got %v", v, got)
				}
			}
			var done []Position
			for _, m := range got {
				done = append(done, Position{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
			}
			if err := r.Commit(ctx, done); err != nil {
				t.Fatalf("Commit: %v", err)
			}

			dlq, err := cl.NewDeadLetterWriter(ProducerConfig{BatchTimeout: time.Millisecond}, dead)
			if err != nil {
				t.Fatal(err)
			}
			defer dlq.Close()
			if err := dlq.Write(ctx, []DeadLetter{{Message: got["accepted-1"], Reason: "unwritable"}}); err != nil {
				t.Fatalf("dead-letter Write: %v", err)
			}
			dr, err := cl.NewGroupReader(readerConfig("dl-"+mech, dead))
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			for _, m := range fetch(t, dr, 1) {
				if string(m.Value) != "accepted-1" || header(m, HeaderReason) != "unwritable" {
					t.Errorf("dead letter %q with reason %q", m.Value, header(m, HeaderReason))
				}
			}
		})
	}
}

func header(m Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestSecuredClientsRefused checks that what the broker refuses fails
// with an error that says why, never showing the password.
func TestSecuredClientsRefused(t *testing.T) {
	b, certs, users := securedBroker(t)
	other := testcert.New(t)
	good := TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	wrong := func(mech string) SASL {
		s := users[mech]
		s.Password = "wr0ng-" + mech
		return s
	}
	cases := []struct {
		name    string
		tls     TLS
		sasl    SASL
		wantErr string
	}{
		{"wrong PLAIN password", good, wrong(SASLPlain), "authentication to Kafka failed: the brokers refused SASL PLAIN user \"plain-user\""},
		{"wrong SCRAM-SHA-256 password", good, wrong(SASLScramSHA256), "authentication to Kafka failed: the brokers refused SASL SCRAM-SHA-256 user \"scram256-user\""},
		{"wrong SCRAM-SHA-512 password", good, wrong(SASLScramSHA512), "authentication to Kafka failed: the brokers refused SASL SCRAM-SHA-512 user \"scram512-user\""},
		{"a user of another mechanism", good, SASL{Mechanism: SASLScramSHA512, Username: "plain-user", Password: "plain-s3cret"}, "authentication to Kafka failed"},
		{"an authority that did not sign the broker", TLS{CAFile: other.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, users[SASLPlain],
			"the brokers' certificate is not signed by an authority trusted (KAFKA_TLS_CA_FILE)"},
		{"no TLS", TLS{}, users[SASLPlain], "closed the connection without answering a first request: it may take TLS only (KAFKA_TLS)"},
		{"no client certificate", TLS{CAFile: certs.CA}, users[SASLPlain],
			"TLS to Kafka: the brokers refused the connection; they may require a client certificate they trust (KAFKA_TLS_CERT_FILE, KAFKA_TLS_KEY_FILE)"},
		{"no SASL", good, SASL{}, "closed the connection at a metadata request: it may require SASL authentication (KAFKA_SASL_MECHANISM)"},
		{"a server name the certificate lacks", TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "other.test"}, users[SASLPlain],
			"the brokers' certificate is not valid for the name expected (KAFKA_TLS_SERVER_NAME)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cl := Cluster{Brokers: []string{b.Addr()}, TLS: tc.tls, SASL: tc.sasl}
			specs := []TopicSpec{{Name: "refused", Partitions: 1, ReplicationFactor: 1}}
			errs := map[string]error{
				"EnsureTopics": cl.EnsureTopics(ctx, specs),
				"CheckTopics":  cl.CheckTopics(ctx, []string{"refused"}),
			}
			w, err := cl.NewWriter(ProducerConfig{BatchTimeout: time.Millisecond}, "refused")
			if err != nil {
				t.Fatal(err)
			}
			// The writer explains only what its error shows; the
			// start-up and readiness checks above diagnose the rest.
			if err := w.Write(ctx, []event.Record{{Value: []byte("x")}}); err == nil || tc.sasl.Password != "" && strings.Contains(err.Error(), tc.sasl.Password) {
				t.Errorf("Write: %v", err)
			}
			_ = w.Close()
			for what, err := range errs {
				t.Logf("%s: %v", what, err)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: %v\nwant an error containing %q", what, err, tc.wantErr)
				}
				if err != nil && (tc.sasl.Password != "" && strings.Contains(err.Error(), tc.sasl.Password) || errors.Is(err, context.DeadlineExceeded)) {
					t.Errorf("%s: the error shows the password or waited out the deadline: %v", what, err)
				}
			}
		})
	}
	t.Run("right names and a client certificate the broker does not trust", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cl := Cluster{Brokers: []string{b.Addr()}, TLS: TLS{CAFile: certs.CA, CertFile: other.ClientCert, KeyFile: other.ClientKey, ServerName: "kafka.test"},
			SASL: users[SASLPlain]}
		if err := cl.CheckTopics(ctx, []string{"anything"}); err == nil {
			t.Error("a client certificate of another authority was accepted")
		}
		cl.TLS.CertFile, cl.TLS.KeyFile = certs.ClientCert, certs.ClientKey
		if err := cl.EnsureTopics(ctx, []TopicSpec{{Name: "by-name", Partitions: 1, ReplicationFactor: 1}}); err != nil {
			t.Errorf("with the server name the certificate carries: %v", err)
		}
	})
}
