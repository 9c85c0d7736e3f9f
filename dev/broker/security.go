package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"
)

// security is the broker's TLS and SASL configuration from its flags.
type security struct {
	certFile, keyFile, clientCAFile string
	users                           []saslUser
}

type saslUser struct{ mechanism, name, password string }

// addUser parses MECHANISM:USER:PASSWORD; the password may hold colons.
func (s *security) addUser(v string) error {
	mech, rest, ok := strings.Cut(v, ":")
	name, pass, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || name == "" || pass == "" {
		return errors.New("want MECHANISM:USER:PASSWORD")
	}
	mech = strings.ToUpper(mech)
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return fmt.Errorf("mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	s.users = append(s.users, saslUser{mechanism: mech, name: name, password: pass})
	return nil
}

// userNames lists the users as MECHANISM:USER, for the log.
func (s *security) userNames() []string {
	var out []string
	for _, u := range s.users {
		out = append(out, u.mechanism+":"+u.name)
	}
	return out
}

// options returns kfake's options and the transport the broker's own
// member watch connects with.
func (s *security) options() ([]kfake.Opt, *kafka.Transport, error) {
	var opts []kfake.Opt
	t := &kafka.Transport{}
	if (s.certFile == "") != (s.keyFile == "") {
		return nil, nil, errors.New("-tls-cert-file and -tls-key-file go together")
	}
	if s.clientCAFile != "" && s.certFile == "" {
		return nil, nil, errors.New("-tls-client-ca-file needs -tls-cert-file and -tls-key-file")
	}
	if s.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("load the broker's certificate: %w", err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if s.clientCAFile != "" {
			pem, err := os.ReadFile(s.clientCAFile)
			if err != nil {
				return nil, nil, fmt.Errorf("read the client authorities: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("%s holds no PEM certificate", s.clientCAFile)
			}
			cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		opts = append(opts, kfake.TLS(cfg))
		// The watch connects to this very listener on loopback: it
		// presents the broker's own certificate and need not verify it.
		t.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true} //nolint:gosec // the broker's own listener
	}
	if len(s.users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range s.users {
			opts = append(opts, kfake.Superuser(u.mechanism, u.name, u.password))
		}
		m, err := s.users[0].mechanismFor()
		if err != nil {
			return nil, nil, err
		}
		t.SASL = m
	}
	return opts, t, nil
}

func (u saslUser) mechanismFor() (sasl.Mechanism, error) {
	switch u.mechanism {
	case "PLAIN":
		return plain.Mechanism{Username: u.name, Password: u.password}, nil
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, u.name, u.password)
	default:
		return scram.Mechanism(scram.SHA256, u.name, u.password)
	}
}
