package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// Records turns each body into the Kafka records ingest would publish for
// it, with the same validator. Every event must be accepted.
func Records(bodies [][]byte, meta event.Meta) ([][]event.Record, error) {
	v := event.NewValidator(event.Limits{})
	out := make([][]event.Record, len(bodies))
	for i, b := range bodies {
		m := meta
		if m.IDSeed == "" {
			m.IDSeed = "loadgen-" + strconv.Itoa(i)
		}
		res, err := v.ProcessBatch(b, m)
		if err != nil {
			return nil, fmt.Errorf("build records of body %d: %w", i, err)
		}
		if len(res.Errors) > 0 || len(res.Quarantined) > 0 {
			return nil, fmt.Errorf("build records of body %d: %d events invalid, first: %+v", i, len(res.Errors), res.Errors[0])
		}
		out[i] = res.Accepted
	}
	return out, nil
}

// CeilingConfig configures a Ceiling.
type CeilingConfig struct {
	// Kafka and Producer are the configuration ingest's writer uses; the
	// writer comes from Kafka.NewWriter so that batching, acks and
	// compression match.
	Kafka    kafka.Cluster
	Producer kafka.ProducerConfig
	Topic    string
	// Records holds one slice per request body; each WriteMessages call
	// sends one slice, as ingest does per request.
	Records     [][]event.Record
	Concurrency int
}

// Ceiling produces records straight to the broker: the most the producer
// and broker can do with ingest's batching, without HTTP and validation in
// front. Runs share one writer, so a short first run warms it up.
type Ceiling struct {
	cfg CeilingConfig
	w   *kafka.Writer
}

// NewCeiling returns a Ceiling with its own writer; Close releases it.
func NewCeiling(cfg CeilingConfig) (*Ceiling, error) {
	if len(cfg.Records) == 0 || cfg.Concurrency <= 0 || cfg.Topic == "" {
		return nil, errors.New("ceiling needs records, a topic and a positive concurrency")
	}
	w, err := cfg.Kafka.NewWriter(cfg.Producer, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("ceiling writer: %w", err)
	}
	return &Ceiling{cfg: cfg, w: w}, nil
}

// Close flushes and closes the writer.
func (c *Ceiling) Close() error { return c.w.Close() }

// Run writes from Concurrency goroutines for d, one WriteMessages call of
// one record slice at a time each.
func (c *Ceiling) Run(ctx context.Context, d time.Duration) (*Report, error) {
	if d <= 0 {
		return nil, errors.New("ceiling run needs a positive duration")
	}
	cfg := &c.cfg
	tallies := make([]*tally, cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for g := range cfg.Concurrency {
		t := newTally()
		tallies[g] = t
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i += cfg.Concurrency {
				begin := time.Now()
				if !begin.Before(end) {
					return
				}
				recs := cfg.Records[i%len(cfg.Records)]
				// The writer converts to a fresh slice per call, as it
				// does for each request ingest publishes.
				err := c.w.Write(ctx, recs)
				outcome := "ok"
				if err != nil {
					outcome = errorOutcome(err)
				}
				t.record(begin, time.Now(), outcome, err == nil, 0)
			}
		})
	}
	wg.Wait()
	r := merge("ceiling", cfg.Concurrency, start, len(cfg.Records[0]), tallies)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("ceiling run interrupted: %w", err)
	}
	return r, nil
}
