// Package webhooks tells an app's endpoints what happened to it, following
// the Standard Webhooks conventions: each message has an ID, a timestamp
// and an HMAC-SHA256 signature over both and the body, with a secret per
// endpoint that can be rotated with overlap (both secrets sign meanwhile).
//
// Messages come from an outbox in the content database, written in the
// transaction of what they tell, so nothing is lost when a process stops;
// a Deliverer sends them, retries with exponential backoff and jitter for
// a day, then marks them failed, and logs every attempt. Endpoints are
// reached through package egress: never a loopback, private or metadata
// address unless the operator allows it.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Topics an endpoint may ask for.
const (
	// TopicPublished: an app that publishes has a new live version (a
	// publish or a rollback).
	TopicPublished = "content.published"
	// TopicChanged: the content of an app that does not publish changed.
	TopicChanged = "content.changed"
	// TopicGapsOpened: the app's gap inbox has groups it did not have.
	TopicGapsOpened = "gaps.opened"
	// TopicErrorRate: the app's runtimes sent more ERROR events in a
	// minute than the endpoint's ErrorRate.
	TopicErrorRate = "errors.rate"
)

// Topics lists every topic.
func Topics() []string {
	return []string{TopicPublished, TopicChanged, TopicGapsOpened, TopicErrorRate}
}

// Bounds of an app's endpoints.
const (
	MaxWebhooks    = 10
	MaxURLBytes    = 2048
	MaxIDBytes     = 64
	MaxErrorRate   = 1_000_000
	SecretPrefix   = "whsec_"
	secretBytes    = 32
	MaxRotateAfter = 7 * 24 * time.Hour
)

// Webhook is an app's endpoint.
type Webhook struct {
	AppID, ID string
	URL       string
	Topics    []string
	// ErrorRate is the ERROR events a minute from which TopicErrorRate
	// tells; zero with that topic means 1.
	ErrorRate int
	// Secret signs deliveries; PreviousSecret too, until PreviousUntil.
	Secret         string
	PreviousSecret string
	PreviousUntil  time.Time
	CreatedAt      time.Time
}

// Secrets are those that sign a message sent at now.
func (w Webhook) Secrets(now time.Time) []string {
	if w.PreviousSecret != "" && now.Before(w.PreviousUntil) {
		return []string{w.Secret, w.PreviousSecret}
	}
	return []string{w.Secret}
}

// Wants says the endpoint asked for topic.
func (w Webhook) Wants(topic string) bool { return slices.Contains(w.Topics, topic) }

// Check refuses what an endpoint may not hold, each problem naming its
// field; the URL's destination is checked apart (egress.CheckURL).
func (w Webhook) Check() []error {
	var errs []error
	if w.ID == "" || len(w.ID) > MaxIDBytes || strings.ContainsFunc(w.ID, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		errs = append(errs, fmt.Errorf("id: 1 to %d letters, digits, '-' or '_'", MaxIDBytes))
	}
	if w.URL == "" || len(w.URL) > MaxURLBytes {
		errs = append(errs, fmt.Errorf("url: 1 to %d bytes", MaxURLBytes))
	}
	if len(w.Topics) == 0 {
		errs = append(errs, fmt.Errorf("topics: at least one of %s", strings.Join(Topics(), ", ")))
	}
	for i, t := range w.Topics {
		if !slices.Contains(Topics(), t) {
			errs = append(errs, fmt.Errorf("topics[%d]: %q is not a topic (%s)", i, t, strings.Join(Topics(), ", ")))
		}
	}
	if w.ErrorRate < 0 || w.ErrorRate > MaxErrorRate {
		errs = append(errs, fmt.Errorf("errorRate: from 0 to %d ERROR events a minute", MaxErrorRate))
	}
	return errs
}

// NewSecret returns a new signing secret: whsec_ and 32 random bytes in
// base64.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// secretKey is the key a secret signs with: the bytes its base64 holds.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("a webhook secret is whsec_ and base64: %w", err)
	}
	return key, nil
}

// Sign returns the value of the webhook-signature header for a message:
// "v1,<base64 HMAC-SHA256>" for each secret, separated by spaces, the
// HMAC over "<id>.<timestamp>.<body>".
func Sign(secrets []string, id string, at time.Time, body []byte) (string, error) {
	var out []string
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return "", err
		}
		out = append(out, "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, at.Unix(), body)))
	}
	return strings.Join(out, " "), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	h.Write(body)
	return h.Sum(nil)
}

// ErrBadSignature is what Verify refuses a message with.
var ErrBadSignature = errors.New("no valid webhook signature")

// Verify checks a message as a receiver does: a signature of the header
// made with secret, and a timestamp within tolerance of now, so that an
// old message cannot be replayed.
func Verify(secret, id, timestamp, signatures string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is not within %v of now", ErrBadSignature, timestamp, tolerance)
	}
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	want := mac(key, id, ts, body)
	for _, sig := range strings.Fields(signatures) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// Delivery states.
const (
	Pending   = "pending"
	Delivered = "delivered"
	Failed    = "failed"
)

// Delivery is one message to one endpoint, with its outcome so far.
type Delivery struct {
	ID        int64
	AppID     string
	WebhookID string
	Topic     string
	Payload   []byte
	CreatedAt time.Time
	// QueuedAt is when it was queued, or queued again (Redeliver): it is
	// retried for Retry.For from then.
	QueuedAt time.Time
	State    string
	Attempts int
	// NextAttempt is when a pending one is tried next.
	NextAttempt time.Time
	LastStatus  int
	LastError   string
	// Log is the attempts, oldest first, when read with them.
	Log []Attempt
}

// MessageID is the webhook-id of the delivery: the same for every attempt,
// so that a receiver can tell a retry from a new message.
func (d Delivery) MessageID() string { return "msg_" + strconv.FormatInt(d.ID, 10) }

// Attempt is one try at a delivery.
type Attempt struct {
	N        int
	At       time.Time
	Status   int // zero: no answer
	Error    string
	Duration time.Duration
}

// DeliveryFilter narrows an app's delivery log.
type DeliveryFilter struct {
	App, Webhook string
	// State is pending, delivered or failed; empty: any.
	State string
	// Before is a delivery's ID: the page after it, newest first.
	Before int64
	Limit  int
}

// ErrTooManyWebhooks refuses an endpoint past MaxWebhooks.
var ErrTooManyWebhooks = fmt.Errorf("an app has at most %d webhooks", MaxWebhooks)

// MaxDeliveriesPage bounds the deliveries one read lists.
const MaxDeliveriesPage = 100

// Retry is when to try a failed delivery again.
type Retry struct {
	// First is the wait after the first failure, doubling after each,
	// up to Longest, each wait drawn between half of it and all of it.
	First, Longest time.Duration
	// For is how long after its creation a delivery is tried; then it
	// is failed.
	For time.Duration
}

// DefaultRetry retries for a day, from ten seconds to an hour apart.
var DefaultRetry = Retry{First: 10 * time.Second, Longest: time.Hour, For: 24 * time.Hour}

// Next is when to try a delivery queued at queued again after its
// attempts-th failed attempt at now; ok is false once it is past For.
// jitter draws from [0, 1).
func (r Retry) Next(queued, now time.Time, attempts int, jitter func() float64) (next time.Time, ok bool) {
	wait := r.First
	for i := 1; i < attempts && wait < r.Longest; i++ {
		wait *= 2
	}
	wait = min(wait, r.Longest)
	wait = wait/2 + time.Duration(jitter()*float64(wait/2))
	next = now.Add(wait)
	return next, next.Before(queued.Add(r.For))
}

// Claim is a delivery taken to be sent, with its endpoint. Its Attempts
// count this attempt; Lease is what its outcome must still hold.
type Claim struct {
	Delivery
	Webhook Webhook
	Lease   int64
}
