package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// TestFilesMakeATLSConnection checks the files with a real handshake in
// both directions: the client trusts the server through the authority, and
// the server trusts the client's certificate; a second authority is not
// trusted.
func TestFilesMakeATLSConnection(t *testing.T) {
	f := New(t, "127.0.0.1", "kafka.test")
	other := New(t)
	pool := func(path string) *x509.CertPool {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(b) {
			t.Fatalf("%s holds no certificate", path)
		}
		return p
	}
	serverCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(f.CA)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	cases := []struct {
		name   string
		cfg    *tls.Config
		wantOK bool
	}{
		{"by IP", &tls.Config{RootCAs: pool(f.CA), Certificates: []tls.Certificate{clientCert}}, true},
		{"by DNS name", &tls.Config{RootCAs: pool(f.CA), ServerName: "kafka.test", Certificates: []tls.Certificate{clientCert}}, true},
		{"a name the certificate lacks", &tls.Config{RootCAs: pool(f.CA), ServerName: "other.test", Certificates: []tls.Certificate{clientCert}}, false},
		{"another authority", &tls.Config{RootCAs: pool(other.CA), Certificates: []tls.Certificate{clientCert}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", ln.Addr().String(), tc.cfg)
			if err == nil {
				err = c.Handshake()
				c.Close()
			}
			if (err == nil) != tc.wantOK {
				t.Errorf("handshake error %v, want success %v", err, tc.wantOK)
			}
		})
	}
}
