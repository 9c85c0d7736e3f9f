// Package event parses and validates batches of runtime events and turns
// accepted events into the Kafka envelope documented in schemas/events.
package event

import (
	"fmt"
	"sync"
	"time"
)

// Default limits. The JSON Schemas under schemas/events state the same
// numbers; a test keeps them in agreement.
const (
	DefaultMaxEvents     = 500
	DefaultMaxEventBytes = 64 << 10
)

// Limits configure a Validator.
type Limits struct {
	// MaxEvents is the largest number of events one batch may hold.
	MaxEvents int
	// MaxEventBytes caps one event as sent (with appId filled in).
	MaxEventBytes int
	// Types lists the admitted values of an event's type field.
	Types []string
}

// DefaultLimits returns the limits used when nothing is configured.
func DefaultLimits() Limits {
	return Limits{
		MaxEvents:     DefaultMaxEvents,
		MaxEventBytes: DefaultMaxEventBytes,
		// The event types the interface names.
		Types: []string{"REQUEST", "ERROR", "AnalyticsEvent"},
	}
}

// Meta is what the ingest service knows about a batch besides its body.
type Meta struct {
	// AppID is the app the events belong to; an event's appId must equal it
	// and is filled from it when missing.
	AppID          string
	OrganizationID string
	ReceivedAt     time.Time
	// IDSeed identifies the batch for event IDs derived when a client sent
	// none: the Idempotency-Key header, or else a hash of the body, so that
	// a retried identical batch yields identical IDs.
	IDSeed string
}

// FieldError describes one problem with one event.
type FieldError struct {
	Index   int    `json:"index"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// BatchError rejects a whole batch before any event is looked at.
type BatchError struct {
	// Status is the HTTP status the batch deserves (400 or 413).
	Status  int
	Field   string
	Message string
}

func (e *BatchError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// Message is one Kafka record ready to publish.
type Message struct {
	Key   []byte
	Value []byte
}

// Result is the outcome of a batch with a valid outer shape.
type Result struct {
	// Accepted holds the envelopes of valid events, in batch order.
	Accepted []Message
	// EventIDs holds the event ID of each accepted message.
	EventIDs []string
	// Quarantined holds one quarantine record per invalid event.
	Quarantined []Message
	// Errors lists every problem found, ordered by event index.
	Errors []FieldError

	out  *[]byte
	pool *sync.Pool
}
