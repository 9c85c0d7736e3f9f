package kafka

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/testcert"
)

func TestClusterCheck(t *testing.T) {
	certs := testcert.New(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	brokers := []string{"127.0.0.1:9092"}
	cases := []struct {
		name    string
		cluster Cluster
		wantErr string // empty: valid
	}{
		{"plaintext", Cluster{Brokers: brokers}, ""},
		{"TLS with the system's authorities", Cluster{Brokers: brokers, TLS: TLS{Enabled: true}}, ""},
		{"TLS with everything", Cluster{Brokers: brokers, TLS: TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "kafka"}}, ""},
		{"each mechanism, any case", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "scram-sha-512", Username: "u", Password: "s3cret"}}, ""},
		{"PLAIN", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "s3cret"}}, ""},
		{"SCRAM-SHA-256", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "SCRAM-SHA-256", Username: "u", Password: "s3cret"}}, ""},
		{"no brokers", Cluster{}, "no Kafka brokers configured"},
		{"certificate without key", Cluster{Brokers: brokers, TLS: TLS{CertFile: certs.ClientCert}},
			fmt.Sprintf("the Kafka TLS client certificate %q (KAFKA_TLS_CERT_FILE) needs its key (KAFKA_TLS_KEY_FILE)", certs.ClientCert)},
		{"key without certificate", Cluster{Brokers: brokers, TLS: TLS{KeyFile: certs.ClientKey}},
			fmt.Sprintf("the Kafka TLS client key %q (KAFKA_TLS_KEY_FILE) needs its certificate (KAFKA_TLS_CERT_FILE)", certs.ClientKey)},
		{"unreadable authorities", Cluster{Brokers: brokers, TLS: TLS{CAFile: missing}},
			fmt.Sprintf("read the Kafka TLS CA file (KAFKA_TLS_CA_FILE): open %s: no such file or directory", missing)},
		{"authorities not PEM", Cluster{Brokers: brokers, TLS: TLS{CAFile: notPEM}},
			fmt.Sprintf("the Kafka TLS CA file %q (KAFKA_TLS_CA_FILE) holds no PEM certificate", notPEM)},
		{"certificate not PEM", Cluster{Brokers: brokers, TLS: TLS{CertFile: notPEM, KeyFile: certs.ClientKey}},
			fmt.Sprintf("load the Kafka TLS client certificate %q and key %q (KAFKA_TLS_CERT_FILE, KAFKA_TLS_KEY_FILE): tls: failed to find any PEM data in certificate input", notPEM, certs.ClientKey)},
		{"key of another certificate", Cluster{Brokers: brokers, TLS: TLS{CertFile: certs.ClientCert, KeyFile: certs.ServerKey}},
			"tls: private key does not match public key"},
		{"unknown mechanism", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "GSSAPI", Username: "u", Password: "s3cret"}},
			`unknown Kafka SASL mechanism "GSSAPI" (KAFKA_SASL_MECHANISM); use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"mechanism without credentials", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "PLAIN"}},
			"the Kafka SASL mechanism PLAIN needs a username (KAFKA_SASL_USERNAME) and a password (KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE)"},
		{"mechanism without password", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "SCRAM-SHA-256", Username: "u"}},
			"the Kafka SASL mechanism SCRAM-SHA-256 needs a password (KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE)"},
		{"credentials without mechanism", Cluster{Brokers: brokers, SASL: SASL{Username: "u", Password: "s3cret"}},
			"a Kafka SASL username or password is set without a mechanism"},
		{"a character SCRAM refuses", Cluster{Brokers: brokers, SASL: SASL{Mechanism: "SCRAM-SHA-256", Username: "u", Password: "s3cret\u0007"}},
			`SASL SCRAM-SHA-256 for Kafka user "u": the username or password holds a character SCRAM does not allow`},
		{"both at once", Cluster{Brokers: brokers, TLS: TLS{CertFile: certs.ClientCert}, SASL: SASL{Mechanism: "PLAIN"}},
			"needs its key (KAFKA_TLS_KEY_FILE)\nthe Kafka SASL mechanism PLAIN needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cluster.Check()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check: %v\nwant an error containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestClusterNeverPrintsThePassword logs and formats a cluster every way
// a program might, and checks that what security is in use shows, but
// never the password.
func TestClusterNeverPrintsThePassword(t *testing.T) {
	c := Cluster{Brokers: []string{"b:9093"}, TLS: TLS{CAFile: "/etc/kafka/ca.pem", ServerName: "kafka.internal"},
		SASL: SASL{Mechanism: "scram-sha-256", Username: "cms", Password: "s3cret"}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("connecting", "kafka", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("connecting", "kafka", c)
	out := logs.String() + fmt.Sprintf("%v %+v %#v %s %v", c, c, c, c.SASL, Settings{Cluster: c})
	for _, want := range []string{`"sasl_mechanism":"SCRAM-SHA-256"`, `"sasl_username":"cms"`, `"tls":true`, `"tls_server_name":"kafka.internal"`,
		"kafka.tls=true", "kafka.sasl_mechanism=SCRAM-SHA-256"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the password is printed:\n%s", out)
	}
	logs.Reset()
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("connecting", "kafka", Cluster{Brokers: []string{"b:9092"}})
	if !strings.Contains(logs.String(), `"tls":false,"sasl_mechanism":"none"`) {
		t.Errorf("plaintext cluster logged as %s", logs.String())
	}
}
