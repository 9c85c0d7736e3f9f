package chstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/testcert"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

func TestTLSConfigRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	files, err := testcert.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name    string
		tls     chstore.TLS
		wantErr string // empty: a configuration
		wantNil bool
	}{
		{"plain", chstore.TLS{}, "", true},
		{"system roots", chstore.TLS{Enabled: true}, "", false},
		{"CA implies TLS", chstore.TLS{CAFile: files.CA}, "", false},
		{"server name implies TLS", chstore.TLS{ServerName: "ch.example"}, "", false},
		{"client certificate", chstore.TLS{CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}, "", false},
		{"CA file missing", chstore.TLS{CAFile: missing}, "read the ClickHouse TLS CA file (CLICKHOUSE_TLS_CA_FILE): open " + missing, false},
		{"CA file not PEM", chstore.TLS{CAFile: notPEM}, "the ClickHouse TLS CA file \"" + notPEM + "\" (CLICKHOUSE_TLS_CA_FILE) holds no PEM certificate", false},
		{"certificate without key", chstore.TLS{CertFile: files.ClientCert}, "(CLICKHOUSE_TLS_CERT_FILE) needs its key (CLICKHOUSE_TLS_KEY_FILE)", false},
		{"key without certificate", chstore.TLS{KeyFile: files.ClientKey}, "(CLICKHOUSE_TLS_KEY_FILE) needs its certificate (CLICKHOUSE_TLS_CERT_FILE)", false},
		{"key not PEM", chstore.TLS{CertFile: files.ClientCert, KeyFile: notPEM}, "load the ClickHouse TLS client certificate \"" + files.ClientCert + "\" and key", false},
		{"key of another certificate", chstore.TLS{CertFile: files.ClientCert, KeyFile: files.ServerKey}, "private key does not match public key", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.tls.Config(chstore.TLSNames)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Errorf("the error quotes the key: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case (c == nil) != tc.wantNil:
				t.Fatalf("config %v, want nil: %v", c, tc.wantNil)
			case c != nil && (c.ServerName != tc.tls.ServerName || (tc.tls.CAFile != "") != (c.RootCAs != nil) || len(c.Certificates) != map[bool]int{true: 1}[tc.tls.CertFile != ""]):
				t.Errorf("config %+v does not follow %+v", c, tc.tls)
			}
		})
	}
}

// tlsServer starts a server whose secure port has a certificate for
// 127.0.0.1 and localhost, signed by a CA written beside it.
func tlsServer(t *testing.T) (*devclickhouse.Server, testcert.Files) {
	t.Helper()
	files, err := testcert.Write(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return devclickhouse.StartForTestWith(t, devclickhouse.Options{TLS: &devclickhouse.TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey}}), files
}

func TestOpenOverTLS(t *testing.T) {
	srv, files := tlsServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tls  chstore.TLS
	}{
		{"CA and address", chstore.TLS{CAFile: files.CA}},
		{"CA, server name and client certificate", chstore.TLS{CAFile: files.CA, ServerName: "localhost", CertFile: files.ClientCert, KeyFile: files.ClientKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.SecureAddr()}, Database: "secured", TLS: tc.tls, StringColumns: stringColumns})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			id := "tls-" + strings.ReplaceAll(tc.name, " ", "-")
			var b chstore.EventBatch
			now := time.Now().UTC()
			chfixture.Event{EventID: id, AppID: "app-1", EventTime: now, ReceivedAt: now, Channel: "web", RawQuery: "opening hours"}.AddTo(&b)
			if err := s.InsertEvents(ctx, &b); err != nil {
				t.Fatal(err)
			}
			var n uint64
			if err := s.Conn().QueryRow(s.Context(ctx), "SELECT count() FROM secured.events WHERE event_id = ?", id).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d rows of %s read back, %v", n, id, err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestOpenOverTLSFailsClearly(t *testing.T) {
	srv, files := tlsServer(t)
	other, err := testcert.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		addr string
		tls  chstore.TLS
		want []string
	}{
		{"CA that did not sign the server's certificate", srv.SecureAddr(), chstore.TLS{CAFile: other.CA},
			[]string{"certificate could not be verified with the CA of -clickhouse-tls-ca-file", "unknown authority"}},
		{"system roots only", srv.SecureAddr(), chstore.TLS{Enabled: true},
			[]string{"certificate could not be verified with the system's roots", "CLICKHOUSE_TLS_CA_FILE", "unknown authority"}},
		{"server name the certificate lacks", srv.SecureAddr(), chstore.TLS{CAFile: files.CA, ServerName: "clickhouse.example"},
			[]string{"not for the expected name", "CLICKHOUSE_TLS_SERVER_NAME", "clickhouse.example"}},
		{"plain connection to the secure port", srv.SecureAddr(), chstore.TLS{},
			[]string{"if this is its secure port (tcp_port_secure), set -clickhouse-tls"}},
		{"TLS to the plain port", srv.Addr(), chstore.TLS{CAFile: files.CA},
			[]string{"does not speak TLS on this port"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{tc.addr}, TLS: tc.tls, DialTimeout: 5 * time.Second})
			if err == nil {
				s.Close()
				t.Fatal("connected")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if ctx.Err() != nil {
				t.Errorf("failed only at the deadline: %v", err)
			}
		})
	}
}
