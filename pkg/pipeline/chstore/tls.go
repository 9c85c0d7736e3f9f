package chstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// TLS is how to reach ClickHouse's secure native port (tcp_port_secure).
// The zero value is a plain connection.
type TLS struct {
	// Enabled turns TLS on with the system's roots; any other field set
	// turns it on too.
	Enabled bool
	// CAFile holds the PEM certificates that sign the server's; empty
	// trusts the system's roots.
	CAFile string
	// ServerName is the name the server's certificate must carry; empty
	// is the host of the address dialled.
	ServerName string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that ask for one; both or neither.
	CertFile, KeyFile string
}

// On reports whether connections use TLS.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.ServerName != "" || t.CertFile != "" || t.KeyFile != ""
}

// Config reads the files and returns the client's TLS configuration, or
// nil for a plain connection.
func (t TLS) Config() (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read ClickHouse TLS CA file (-clickhouse-tls-ca-file): %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ClickHouse TLS CA file %s (-clickhouse-tls-ca-file) holds no PEM certificate", t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return nil, errors.New("ClickHouse TLS client certificate -clickhouse-tls-cert-file is set without its key -clickhouse-tls-key-file (CLICKHOUSE_TLS_KEY_FILE)")
	case t.CertFile == "" && t.KeyFile != "":
		return nil, errors.New("ClickHouse TLS client key -clickhouse-tls-key-file is set without its certificate -clickhouse-tls-cert-file (CLICKHOUSE_TLS_CERT_FILE)")
	case t.CertFile != "":
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load ClickHouse TLS client certificate %s and key (-clickhouse-tls-cert-file, -clickhouse-tls-key-file): %w", t.CertFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// explainDial adds what a failed first query most likely means about the
// TLS settings; the server's own words stay in the chain.
func explainDial(t TLS, err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &hostname):
		return fmt.Errorf("the server's TLS certificate is not for the expected name; set -clickhouse-tls-server-name (CLICKHOUSE_TLS_SERVER_NAME) to a name it carries: %w", err)
	case (errors.As(err, &unknownCA) || errors.As(err, &verify)) && t.CAFile == "":
		return fmt.Errorf("the server's TLS certificate could not be verified with the system's roots; name the CA that signs it with -clickhouse-tls-ca-file (CLICKHOUSE_TLS_CA_FILE): %w", err)
	case errors.As(err, &unknownCA), errors.As(err, &verify):
		return fmt.Errorf("the server's TLS certificate could not be verified with the CA of -clickhouse-tls-ca-file (CLICKHOUSE_TLS_CA_FILE): %w", err)
	case errors.As(err, &record):
		return fmt.Errorf("the server does not speak TLS on this port; use its secure port (tcp_port_secure) or turn -clickhouse-tls off: %w", err)
	case !t.On() && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Errorf("the server closed the connection at once; if this is its secure port (tcp_port_secure), set -clickhouse-tls (CLICKHOUSE_TLS): %w", err)
	}
	return err
}
