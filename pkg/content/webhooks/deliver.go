package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/edge/egress"
)

// Store is the outbox as a Deliverer uses it.
type Store interface {
	// ClaimDeliveries takes up to n pending deliveries due at now, at
	// most one of each app and none of the busy apps', leasing them until
	// now+lease: a process that stops before finishing one leaves it to
	// be tried again once the lease ends.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, n int, busy []string) ([]Claim, error)
	// FinishAttempt records an attempt at a delivery and, when the
	// claim's lease still holds it, the delivery's state after it and
	// when a pending one is tried next.
	FinishAttempt(ctx context.Context, id, lease int64, a Attempt, state string, next time.Time) error
}

// Sender sends a request to an endpoint (an egress.Client).
type Sender interface {
	Do(req *http.Request) (egress.Answer, error)
}

// Config tunes a Deliverer.
type Config struct {
	// Workers is how many deliveries are sent at once; PerApp how many
	// of one app's, so that an app's slow or failing endpoints hold no
	// more than that of the others'.
	Workers, PerApp int
	// Poll is how often the outbox is read when nothing woke the
	// Deliverer.
	Poll time.Duration
	// Lease is how long a delivery claimed is left to its process
	// before another may try it: longer than a request may take.
	Lease time.Duration
	Retry Retry
}

// Defaults of Config.
const (
	DefaultWorkers = 8
	DefaultPerApp  = 2
	DefaultPoll    = time.Second
	DefaultLease   = time.Minute
	// maxErrorBytes bounds what an attempt keeps of an answer or error.
	maxErrorBytes = 300
)

// Deliverer sends the outbox's messages.
type Deliverer struct {
	cfg    Config
	store  Store
	sender Sender
	log    *slog.Logger
	now    func() time.Time
	jitter func() float64
	wake   chan struct{}

	mu       sync.Mutex
	inFlight map[string]int // by app

	attempts *prometheus.CounterVec
}

// NewDeliverer returns a Deliverer; reg, when not nil, gets its metrics.
func NewDeliverer(cfg Config, store Store, sender Sender, log *slog.Logger, reg prometheus.Registerer) *Deliverer {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PerApp <= 0 {
		cfg.PerApp = DefaultPerApp
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retry.For <= 0 {
		cfg.Retry = DefaultRetry
	}
	d := &Deliverer{cfg: cfg, store: store, sender: sender, log: log, now: time.Now, jitter: rand.Float64,
		wake: make(chan struct{}, 1), inFlight: map[string]int{},
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cms", Subsystem: "webhooks", Name: "attempts_total",
			Help: "Attempts at webhook deliveries, by outcome (delivered, retry, failed)."}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(d.attempts)
	}
	return d
}

// Wake makes the Deliverer read the outbox now rather than at its next
// poll: a message was written by this process.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run sends deliveries until ctx ends, then waits for those under way.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		d.round(ctx, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// round claims what the free workers can take and sends each.
func (d *Deliverer) round(ctx context.Context, wg *sync.WaitGroup) {
	d.mu.Lock()
	free := d.cfg.Workers
	var busy []string
	for app, n := range d.inFlight {
		free -= n
		if n >= d.cfg.PerApp {
			busy = append(busy, app)
		}
	}
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	claims, err := d.store.ClaimDeliveries(ctx, d.now(), d.cfg.Lease, free, busy)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("reading the webhook outbox failed; trying again at the next poll", "err", err)
		}
		return
	}
	d.mu.Lock()
	for _, c := range claims {
		d.inFlight[c.AppID]++
	}
	d.mu.Unlock()
	for _, c := range claims {
		wg.Go(func() {
			defer func() {
				d.mu.Lock()
				if d.inFlight[c.AppID]--; d.inFlight[c.AppID] <= 0 {
					delete(d.inFlight, c.AppID)
				}
				d.mu.Unlock()
				d.Wake() // a worker is free, and the app may have more
			}()
			d.deliver(ctx, c)
		})
	}
}

// deliver makes one attempt at a claimed delivery and records it.
func (d *Deliverer) deliver(ctx context.Context, c Claim) {
	start := d.now()
	a := Attempt{N: c.Attempts, At: start}
	status, err := d.send(ctx, c, start)
	a.Duration = d.now().Sub(start)
	a.Status = status
	state, next, outcome := Delivered, start, "delivered"
	if err != nil {
		a.Error = clip(err.Error())
		var ok bool
		if next, ok = d.cfg.Retry.Next(c.QueuedAt, start, a.N, d.jitter); ok {
			state, outcome = Pending, "retry"
		} else {
			state, outcome = Failed, "failed"
		}
	}
	d.attempts.WithLabelValues(outcome).Inc()
	// Recorded even as the process stops: the attempt was made.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.store.FinishAttempt(rctx, c.ID, c.Lease, a, state, next); err != nil {
		d.log.Warn("recording a webhook attempt failed; the delivery is tried again when its lease ends", "err", err,
			"app_id", c.AppID, "webhook", c.WebhookID, "delivery", c.ID)
	}
	if state == Failed {
		d.log.Warn("webhook delivery failed for good", "app_id", c.AppID, "webhook", c.WebhookID, "delivery", c.ID, "attempts", a.N, "err", a.Error)
	}
}

// send posts the message, signed, and answers the status and why the
// attempt failed (nil for a 2xx answer).
func (d *Deliverer) send(ctx context.Context, c Claim, at time.Time) (int, error) {
	id := c.MessageID()
	sig, err := Sign(c.Webhook.Secrets(at), id, at, c.Payload)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Webhook.URL, bytes.NewReader(c.Payload))
	if err != nil {
		return 0, fmt.Errorf("the webhook's URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "assistant-cms-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(at.Unix()))
	req.Header.Set("webhook-signature", sig)
	ans, err := d.sender.Do(req)
	if err != nil {
		return 0, err
	}
	if ans.Status < 200 || ans.Status > 299 {
		return ans.Status, fmt.Errorf("HTTP %d: %s", ans.Status, ans.Body)
	}
	return ans.Status, nil
}

// clip keeps the first maxErrorBytes of s, whole characters only.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorBytes {
		return s
	}
	s = s[:maxErrorBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
