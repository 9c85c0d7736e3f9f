// Package tlsfiles builds a client's TLS configuration from PEM files, as
// the Kafka and ClickHouse connections take it: authorities to trust, an
// optional client certificate and the name the server must carry.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files say how a client connects over TLS. The zero value is a plain
// connection.
type Files struct {
	// Enabled turns TLS on with the system's roots; any other field set
	// turns it on too.
	Enabled bool
	// CAFile holds the PEM certificates of the authorities that sign the
	// server's; empty trusts the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that ask for one; both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry; empty
	// is the host of the address dialled.
	ServerName string
}

// On reports whether connections use TLS: naming any file or a server
// name implies it.
func (f Files) On() bool {
	return f.Enabled || f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" || f.ServerName != ""
}

// Names are what errors call the server and the settings of the files,
// so that a message says which variable to fix.
type Names struct {
	// Server is what the client connects to ("Kafka", "ClickHouse").
	Server string
	// CA, Cert and Key are the variables of CAFile, CertFile, KeyFile.
	CA, Cert, Key string
}

// Config reads the files and returns the TLS configuration, or nil when
// TLS is off. The files are read at every call, so that renewed
// certificates are picked up by the next client built.
func (f Files) Config(n Names) (*tls.Config, error) {
	if !f.On() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the %s TLS CA file (%s): %w", n.Server, n.CA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the %s TLS CA file %q (%s) holds no PEM certificate", n.Server, f.CAFile, n.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		return nil, fmt.Errorf("the %s TLS client certificate %q (%s) needs its key (%s)", n.Server, f.CertFile, n.Cert, n.Key)
	case f.CertFile == "" && f.KeyFile != "":
		return nil, fmt.Errorf("the %s TLS client key %q (%s) needs its certificate (%s)", n.Server, f.KeyFile, n.Key, n.Cert)
	case f.CertFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the %s TLS client certificate %q and key %q (%s, %s): %w", n.Server, f.CertFile, f.KeyFile, n.Cert, n.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
