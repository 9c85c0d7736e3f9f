// Package kafka holds all of the pipeline's Kafka client configuration:
// how clients reach the brokers, the producer ingest publishes the records
// of package event through, the consumer-group reader and dead-letter
// writer of the consumer, topic creation and checks, and the command-line
// flags of these settings. What is written is an event.Record; what is
// read, a Message.
package kafka

import (
	"errors"
	"net"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Cluster says how to reach the Kafka cluster. Every writer, reader and
// admin request is built from it, so connection settings such as TLS and
// SASL belong here and in dialer, and nowhere else.
type Cluster struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string
	// TLS encrypts the connections; the zero value is plaintext.
	TLS TLS
	// SASL authenticates the connections; the zero value is none.
	SASL SASL
}

// Check refuses settings that cannot make a connection: no brokers, a
// client certificate without its key, files that cannot be read or hold
// no PEM, an unknown SASL mechanism or one without its credentials. The
// errors name the settings, never a password.
func (c Cluster) Check() error {
	_, err := c.secured()
	return err
}

// secured checks the brokers and returns the connections' security.
func (c Cluster) secured() (security, error) {
	if len(c.Brokers) == 0 {
		return security{}, errors.New("no Kafka brokers configured")
	}
	return c.security()
}

// dialTimeout bounds connecting to a broker, handshakes included.
const dialTimeout = 10 * time.Second

// dialer is how connections to the brokers are made: readers use it as it
// is, and transport derives writers' and admin requests' connections from
// it, so a setting made here (TLS, SASLMechanism, ClientID) reaches all of
// them.
func (c Cluster) dialer() (*kafkago.Dialer, error) {
	s, err := c.secured()
	if err != nil {
		return nil, err
	}
	return &kafkago.Dialer{Timeout: dialTimeout, DualStack: true, TLS: s.tls, SASLMechanism: s.sasl}, nil
}

// transport returns a connection pool for writers and admin requests, made
// as dialer says. Its owner must call CloseIdleConnections when done, or
// the pool's goroutines live on.
func (c Cluster) transport() (*kafkago.Transport, error) {
	d, err := c.dialer()
	if err != nil {
		return nil, err
	}
	return &kafkago.Transport{
		Dial:        (&net.Dialer{Timeout: d.Timeout}).DialContext,
		DialTimeout: d.Timeout,
		ClientID:    d.ClientID,
		TLS:         d.TLS,
		SASL:        d.SASLMechanism,
	}, nil
}
