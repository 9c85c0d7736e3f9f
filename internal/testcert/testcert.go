// Package testcert writes a throwaway certificate authority with a server
// and a client certificate signed by it, so that tests can run servers and
// clients over TLS without any certificate kept in the repository. It is
// never used in production.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the paths of the PEM files Write creates.
type Files struct {
	// CA is the authority's certificate, which clients trust.
	CA string
	// ServerCert and ServerKey are for the server, valid for the hosts
	// given to Write.
	ServerCert, ServerKey string
	// ClientCert and ClientKey authenticate a client (common name
	// ClientName) to servers that ask for a certificate.
	ClientCert, ClientKey string
}

// ClientName is the common name of the client certificate.
const ClientName = "cms-client"

// New writes the files into a directory of the test's, removed when it
// ends, and fails the test on error.
func New(t testing.TB, hosts ...string) Files {
	t.Helper()
	f, err := Write(t.TempDir(), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Write creates ca.pem, server.pem, server-key.pem, client.pem and
// client-key.pem in dir: a new authority, valid for a day, and the server
// certificate valid for hosts (IP addresses or DNS names; DefaultHosts
// localhost, 127.0.0.1 and ::1 when none). Every call makes a new authority, so files of two calls do
// not trust each other.
func Write(dir string, hosts ...string) (Files, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	now := time.Now()
	ca, caKey, caDER, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "cms test authority"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil, nil, now)
	if err != nil {
		return Files{}, err
	}
	server := &x509.Certificate{
		Subject:  pkix.Name{CommonName: hosts[0]},
		KeyUsage: x509.KeyUsageDigitalSignature,
		// Client use too, so that a server can connect to itself with it.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	_, serverKey, serverDER, err := issue(server, ca, caKey, now)
	if err != nil {
		return Files{}, err
	}
	_, clientKey, clientDER, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey, now)
	if err != nil {
		return Files{}, err
	}
	f := Files{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
	}
	serverKeyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		return Files{}, fmt.Errorf("encode the server key: %w", err)
	}
	clientKeyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		return Files{}, fmt.Errorf("encode the client key: %w", err)
	}
	for _, w := range []struct {
		path, kind string
		der        []byte
	}{
		{f.CA, "CERTIFICATE", caDER},
		{f.ServerCert, "CERTIFICATE", serverDER},
		{f.ServerKey, "PRIVATE KEY", serverKeyDER},
		{f.ClientCert, "CERTIFICATE", clientDER},
		{f.ClientKey, "PRIVATE KEY", clientKeyDER},
	} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), 0o600); err != nil {
			return Files{}, fmt.Errorf("write %s: %w", w.path, err)
		}
	}
	return f, nil
}

// issue makes a key for tmpl and signs it with parent's key, or with its
// own when parent is nil. It returns the parsed certificate, its key and
// the certificate in DER.
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	signer := key
	if parent == nil {
		parent = tmpl
	} else {
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return cert, key, der, nil
}
