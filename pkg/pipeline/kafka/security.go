package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/assistantcms/cms/pkg/tlsfiles"
)

// TLS says how connections to the brokers are encrypted; the zero value
// is plaintext.
type TLS = tlsfiles.Files

// tlsNames are the settings TLS errors name.
var tlsNames = tlsfiles.Names{Server: "Kafka", CA: "KAFKA_TLS_CA_FILE", Cert: "KAFKA_TLS_CERT_FILE", Key: "KAFKA_TLS_KEY_FILE"}

// The SASL mechanisms supported, as Kafka names them.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASL says how clients authenticate to the brokers.
type SASL struct {
	// Mechanism is empty (no SASL), PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512, in any case.
	Mechanism string
	Username  string
	// Password is never printed: String and LogValue leave it out.
	Password string
}

// String describes s without its password.
func (s SASL) String() string {
	if s.Mechanism == "" {
		return "none"
	}
	return fmt.Sprintf("%s user %q", s.mechanism(), s.Username)
}

// GoString is %#v of s, with the password left out.
func (s SASL) GoString() string {
	return fmt.Sprintf("kafka.SASL{Mechanism:%q, Username:%q, Password:\"[redacted]\"}", s.Mechanism, s.Username)
}

func (s SASL) mechanism() string { return strings.ToUpper(strings.TrimSpace(s.Mechanism)) }

// LogValue describes the connection settings, without the password, so
// that logging a Cluster tells what security is in use.
func (c Cluster) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Any("brokers", c.Brokers), slog.Bool("tls", c.TLS.On())}
	if c.TLS.On() {
		if c.TLS.ServerName != "" {
			attrs = append(attrs, slog.String("tls_server_name", c.TLS.ServerName))
		}
		if c.TLS.CAFile != "" {
			attrs = append(attrs, slog.String("tls_ca_file", c.TLS.CAFile))
		}
		attrs = append(attrs, slog.Bool("tls_client_certificate", c.TLS.CertFile != ""))
	}
	mech := c.SASL.mechanism()
	if mech == "" {
		mech = "none"
	}
	attrs = append(attrs, slog.String("sasl_mechanism", mech))
	if c.SASL.mechanism() != "" {
		attrs = append(attrs, slog.String("sasl_username", c.SASL.Username))
	}
	return slog.GroupValue(attrs...)
}

// security is what connections are made with: nil fields mean plaintext
// and no authentication.
type security struct {
	tls  *tls.Config
	sasl sasl.Mechanism
}

// security reads the TLS files (at every client built, so that renewed
// certificates are picked up) and builds the SASL mechanism.
func (c Cluster) security() (security, error) {
	var s security
	var errs []error
	cfg, err := c.TLS.Config(tlsNames)
	if err != nil {
		errs = append(errs, err)
	}
	s.tls = cfg
	m, err := c.SASL.build()
	if err != nil {
		errs = append(errs, err)
	}
	s.sasl = m
	return s, errors.Join(errs...)
}

// build returns the SASL mechanism, or nil when none is configured.
func (s SASL) build() (sasl.Mechanism, error) {
	mech := s.mechanism()
	if mech == "" {
		if s.Username != "" || s.Password != "" {
			return nil, errors.New("a Kafka SASL username or password is set without a mechanism (KAFKA_SASL_MECHANISM: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return nil, nil
	}
	if mech != SASLPlain && mech != SASLScramSHA256 && mech != SASLScramSHA512 {
		return nil, fmt.Errorf("unknown Kafka SASL mechanism %q (KAFKA_SASL_MECHANISM); use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	var missing []string
	if s.Username == "" {
		missing = append(missing, "a username (KAFKA_SASL_USERNAME)")
	}
	if s.Password == "" {
		missing = append(missing, "a password (KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the Kafka SASL mechanism %s needs %s", mech, strings.Join(missing, " and "))
	}
	if mech == SASLPlain {
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	}
	algo := scram.SHA256
	if mech == SASLScramSHA512 {
		algo = scram.SHA512
	}
	m, err := scram.Mechanism(algo, s.Username, s.Password)
	if err != nil {
		// Not wrapped: SASLprep's error quotes the character it refused,
		// which may be the password's.
		return nil, fmt.Errorf("SASL %s for Kafka user %q: the username or password holds a character SCRAM does not allow (SASLprep, RFC 4013)", mech, s.Username)
	}
	return m, nil
}

// ErrAuthenticationFailed marks errors of connections the brokers refused
// to authenticate (SASL).
var ErrAuthenticationFailed = errors.New("authentication to Kafka failed")

// explain adds to an error of a request to the brokers what the likely
// cause is, when it is the connection's security. Some refusals reach
// kafka-go only as a closed connection (brokers that drop a connection
// whose SASL exchange failed, TLS failures seen by a connection pool);
// for those one connection is made anew, step by step, to find the step
// that fails.
func (c Cluster) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if e := c.explainKnown(err); e != nil {
		return e
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, kafkago.BrokerNotAvailable) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
	defer cancel()
	if cause := c.diagnose(ctx); cause != nil {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// explainKnown explains err when it is one security causes, or returns nil.
func (c Cluster) explainKnown(err error) error {
	if errors.Is(err, kafkago.SASLAuthenticationFailed) || errors.Is(err, kafkago.IllegalSASLState) {
		return fmt.Errorf("%w: the brokers refused SASL %s; check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or its _FILE): %w", ErrAuthenticationFailed, c.SASL, err)
	}
	if errors.Is(err, kafkago.UnsupportedSASLMechanism) {
		return fmt.Errorf("%w: the brokers do not offer SASL mechanism %s (KAFKA_SASL_MECHANISM): %w", ErrAuthenticationFailed, c.SASL.mechanism(), err)
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownAuthority):
		return fmt.Errorf("TLS to Kafka: the brokers' certificate is not signed by an authority trusted (KAFKA_TLS_CA_FILE): %w", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("TLS to Kafka: the brokers' certificate is not valid for the name expected (KAFKA_TLS_SERVER_NAME): %w", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("TLS to Kafka: the brokers' certificate is not valid: %w", err)
	case errors.As(err, &record):
		return fmt.Errorf("TLS to Kafka: the brokers do not speak TLS on %v (unset KAFKA_TLS?): %w", c.Brokers, err)
	case strings.Contains(err.Error(), "remote error: tls: "):
		// The broker's TLS alert, which crypto/tls reports by text only.
		return fmt.Errorf("TLS to Kafka: the brokers refused the connection; they may require a client certificate they trust (KAFKA_TLS_CERT_FILE, KAFKA_TLS_KEY_FILE): %w", err)
	}
	return nil
}

// diagnose connects to the first broker that accepts a connection, and
// finds the first step that fails: the TLS handshake, a first request
// every broker answers before authentication (ApiVersions), the SASL
// exchange, or without SASL a metadata request. It returns what it found,
// or nil when it found nothing to add to the failed request's error.
func (c Cluster) diagnose(ctx context.Context) error {
	d, err := c.dialer()
	if err != nil {
		return err
	}
	bare := *d
	bare.SASLMechanism = nil
	for _, addr := range c.Brokers {
		conn, err := bare.DialContext(ctx, "tcp", addr)
		if err != nil {
			if e := c.explainKnown(err); e != nil {
				return e
			}
			continue // not reachable: the failed request said so already
		}
		_ = conn.SetDeadline(time.Now().Add(dialTimeout))
		_, err = conn.ApiVersions()
		if err == nil && d.SASLMechanism == nil {
			_, err = conn.Brokers()
			if err != nil {
				_ = conn.Close()
				if e := c.explainKnown(err); e != nil {
					return e
				}
				return fmt.Errorf("broker %s answered a first request but closed the connection at a metadata request: it may require SASL authentication (KAFKA_SASL_MECHANISM): %w", addr, err)
			}
		}
		_ = conn.Close()
		if err != nil {
			if e := c.explainKnown(err); e != nil {
				return e
			}
			if !c.TLS.On() {
				return fmt.Errorf("broker %s closed the connection without answering a first request: it may take TLS only (KAFKA_TLS): %w", addr, err)
			}
			return nil
		}
		if d.SASLMechanism == nil {
			return nil
		}
		conn, err = d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if e := c.explainKnown(err); e != nil {
				return e
			}
			return fmt.Errorf("%w: broker %s ended the SASL %s exchange; check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or its _FILE): %w",
				ErrAuthenticationFailed, addr, c.SASL, err)
		}
		_ = conn.Close()
		return nil
	}
	return nil
}
