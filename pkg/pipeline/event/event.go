// Package event is the event model: it parses and validates batches of
// runtime events and turns each event into the record to publish, the
// envelope of an accepted event or the quarantine record of a refused one,
// as documented in schemas/events. It knows neither the broker nor the
// database: the caller publishes the records, and the consumer's side
// turns them into rows.
package event

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Default limits. The JSON Schemas under schemas/events state the same
// numbers; a test keeps them in agreement.
const (
	// DefaultMaxEvents is the most events in one batch: what ingest holds
	// of a batch grows with its events as well as its bytes, and a batch
	// of this many with the largest body fits in an app's default share of
	// ingest's body memory. A runtime's turn sends a handful; the reference
	// client re-sends a refused batch, grown, for as long as it runs, so a
	// runtime cut off for long enough to queue more never gets through.
	DefaultMaxEvents = 25_000
	// DefaultMaxEventBytes fits the knowledge-base turns of the reference
	// client, whose requests carry up to ten whole documents.
	DefaultMaxEventBytes = 1 << 20
	// DefaultMaxRecordBytes is the largest Kafka record value written: the
	// default max.message.bytes of the topics the service creates, minus
	// room for the record batch's own framing.
	DefaultMaxRecordBytes = 8<<20 - 64<<10
)

// Limits configure a Validator.
type Limits struct {
	// MaxEvents is the largest number of events one batch may hold.
	MaxEvents int
	// MaxEventBytes caps one event as sent (with appId filled in).
	MaxEventBytes int
	// MaxRecordBytes caps one Kafka record value. A quarantine record
	// keeps the event whole within it; only an event too large for that
	// is kept in part.
	MaxRecordBytes int
	// Types, when not empty, lists the admitted values of an event's type
	// field; empty admits any type.
	Types []string
}

// DefaultLimits returns the limits used when nothing is configured: any
// event type is admitted.
func DefaultLimits() Limits {
	return Limits{
		MaxEvents:      DefaultMaxEvents,
		MaxEventBytes:  DefaultMaxEventBytes,
		MaxRecordBytes: DefaultMaxRecordBytes,
	}
}

// EnvelopeOverhead bounds what an envelope adds to an event (IDs of at
// most 128 characters, each escaped at worst to six bytes, and times): the
// record of an event of MaxEventBytes is at most this much larger.
const EnvelopeOverhead = 4 << 10

// Check reports limits that cannot work together.
func (l Limits) Check() error {
	if l.MaxEvents <= 0 || l.MaxEventBytes <= 0 || l.MaxRecordBytes <= 0 {
		return fmt.Errorf("event limits must be positive: %d events, %d bytes per event, %d bytes per record",
			l.MaxEvents, l.MaxEventBytes, l.MaxRecordBytes)
	}
	if need := l.MaxEventBytes + EnvelopeOverhead; l.MaxRecordBytes < need {
		return fmt.Errorf("a record of at most %d bytes cannot hold an event of %d bytes in its envelope; allow records of at least %d bytes",
			l.MaxRecordBytes, l.MaxEventBytes, need)
	}
	for _, t := range l.Types {
		if t == "" {
			return fmt.Errorf("the event type allow-list %q holds an empty type", l.Types)
		}
	}
	return nil
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
	// EventIDs, when set, gives by index the IDs of events sent without
	// one, instead of deriving them: a resubmitted event keeps the ID it
	// got when it was first received.
	EventIDs []string
	// TokenID and ClientNetwork say who sent the batch, as the server saw
	// it: the ID of the access token and the client's network (see
	// clientnet.Of). Envelopes carry them when set;
	// HISTORICAL suggestions count distinct senders by them.
	TokenID, ClientNetwork string
}

// FieldError describes one problem with one event.
type FieldError struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	// Reason is one of the Reason constants: a short, stable code that
	// metrics and the quarantine table group by.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Reasons an event is quarantined for.
const (
	ReasonNotObject      = "not_object"       // the event is not a JSON object
	ReasonMissing        = "missing"          // a required field is absent
	ReasonWrongType      = "wrong_type"       // a field has the wrong JSON type
	ReasonTooLong        = "too_long"         // a string is over its length limit
	ReasonInvalid        = "invalid_value"    // a value is empty, out of range or not JSON where JSON is required
	ReasonDuplicateKey   = "duplicate_key"    // a checked key appears twice in one object
	ReasonAppMismatch    = "app_mismatch"     // appId names another app than the token's
	ReasonTypeNotAllowed = "type_not_allowed" // the type is not in the configured allow-list
	ReasonTooLarge       = "too_large"        // the event is over the size limit
	ReasonMoreErrors     = "more_errors"      // the note that further problems were not listed
)

// Reasons returns every reason an event's first error can have, for
// metrics whose series start at zero.
func Reasons() []string {
	return []string{ReasonNotObject, ReasonMissing, ReasonWrongType, ReasonTooLong, ReasonInvalid,
		ReasonDuplicateKey, ReasonAppMismatch, ReasonTypeNotAllowed, ReasonTooLarge}
}

// BatchErrorKind says why a batch was refused whole.
type BatchErrorKind int

// Kinds of BatchError.
const (
	// BatchInvalid: the body is not a JSON object with a non-empty events
	// array.
	BatchInvalid BatchErrorKind = iota + 1
	// BatchTooLarge: the batch holds more events than allowed.
	BatchTooLarge
)

func (k BatchErrorKind) String() string {
	switch k {
	case BatchInvalid:
		return "invalid"
	case BatchTooLarge:
		return "too large"
	}
	return "BatchErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// BatchError rejects a whole batch before any event is looked at.
type BatchError struct {
	Kind    BatchErrorKind
	Field   string
	Message string
}

func (e *BatchError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// Record is one record to publish to Kafka: an accepted event's envelope,
// keyed by app and session, or the quarantine record of a refused event,
// keyed by app. The producer takes the records of a Result as they are.
type Record struct {
	Key   []byte
	Value []byte
}

// Result is the outcome of a batch with a valid outer shape.
type Result struct {
	// Accepted holds the envelopes of valid events, in batch order.
	Accepted []Record
	// Quarantined holds one quarantine record per invalid event.
	Quarantined []Record
	// Errors lists every problem found, ordered by event index.
	Errors []FieldError

	out  *[]byte
	pool *sync.Pool
}
