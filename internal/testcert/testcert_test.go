package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
)

func TestNewIssuesVerifiableCertificates(t *testing.T) {
	f, err := New(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	cases := []struct {
		name, cert, key, host string
		usage                 x509.ExtKeyUsage
		wantErr               string
	}{
		{"server by IP", f.ServerCert, f.ServerKey, "127.0.0.1", x509.ExtKeyUsageServerAuth, ""},
		{"server by name", f.ServerCert, f.ServerKey, "localhost", x509.ExtKeyUsageServerAuth, ""},
		{"server by another name", f.ServerCert, f.ServerKey, "other.example", x509.ExtKeyUsageServerAuth, "not other.example"},
		{"client", f.ClientCert, f.ClientKey, "", x509.ExtKeyUsageClientAuth, ""},
		{"client is no server", f.ClientCert, f.ClientKey, "", x509.ExtKeyUsageServerAuth, "incompatible key usage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := tls.LoadX509KeyPair(tc.cert, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := x509.ParseCertificate(pair.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("verify: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("verify: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
