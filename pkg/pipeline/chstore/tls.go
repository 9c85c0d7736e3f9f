package chstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/assistantcms/cms/pkg/tlsfiles"
)

// TLS is how to reach ClickHouse's secure native port (tcp_port_secure).
// The zero value is a plain connection.
type TLS = tlsfiles.Files

// tlsNames are the settings TLS errors name.
var tlsNames = tlsfiles.Names{Server: "ClickHouse", CA: "CLICKHOUSE_TLS_CA_FILE", Cert: "CLICKHOUSE_TLS_CERT_FILE", Key: "CLICKHOUSE_TLS_KEY_FILE"}

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
