// Package consumer moves events from the Kafka events topic, and the
// events ingest refused from the quarantine topic, into ClickHouse: a
// consumer group member that decodes each record into a row (package
// columns), inserts large batches and commits offsets only after
// ClickHouse has accepted them.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/assistantcms/cms/pkg/backoff"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// Sink stores rows; each insert takes a whole batch or none of it.
type Sink interface {
	InsertEvents(ctx context.Context, rows *chstore.EventBatch) error
	InsertQuarantine(ctx context.Context, rows []chstore.QuarantineRow) error
}

// Source is the consumer-group side of the topics.
type Source interface {
	Fetch(ctx context.Context) (kafka.Message, error)
	// Commit records that each partition was processed up to and
	// including the position given for it.
	Commit(ctx context.Context, done []kafka.Position) error
}

// DeadLetters takes messages that can never be written.
type DeadLetters interface {
	Write(ctx context.Context, letters []kafka.DeadLetter) error
}

// Config tunes batching and retries.
type Config struct {
	// BatchRows flushes a batch once it holds this many messages.
	BatchRows int
	// BatchBytes flushes a batch once its messages hold this many bytes,
	// so that batches of large events stay within memory.
	BatchBytes int
	// QuarantineTopic names the topic whose records are quarantined
	// events; every other topic holds envelopes.
	QuarantineTopic string
	// FlushInterval flushes a batch this long after its first message.
	FlushInterval time.Duration
	// RetryMin and RetryMax bound the backoff between failed inserts.
	RetryMin, RetryMax time.Duration
	// ShutdownTimeout bounds the final flush after the context ends.
	ShutdownTimeout time.Duration
	// EventTimes bounds the runtime times that become events' times;
	// zero fields take the defaults of package columns.
	EventTimes columns.TimeWindow
}

// Defaults: ClickHouse prefers thousands of rows per insert and about one
// insert per second per table.
const (
	DefaultBatchRows       = 20000
	DefaultBatchBytes      = 64 << 20
	DefaultFlushInterval   = time.Second
	DefaultRetryMin        = 100 * time.Millisecond
	DefaultRetryMax        = 10 * time.Second
	DefaultShutdownTimeout = 12 * time.Second
)

func (c Config) withDefaults() Config {
	if c.BatchRows <= 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	c.EventTimes = c.EventTimes.WithDefaults()
	return c
}

// Consumer runs the fetch, insert, commit loop.
type Consumer struct {
	cfg     Config
	src     Source
	sink    Sink
	dlq     DeadLetters
	metrics *Metrics
	log     *slog.Logger
	dec     columns.Decoder

	// sinkOK is false while inserts fail, for readiness.
	sinkOK atomic.Bool
}

// New returns a Consumer.
func New(cfg Config, src Source, sink Sink, dlq DeadLetters, m *Metrics, log *slog.Logger) *Consumer {
	c := &Consumer{cfg: cfg.withDefaults(), src: src, sink: sink, dlq: dlq, metrics: m, log: log}
	c.dec.Times = c.cfg.EventTimes
	c.sinkOK.Store(true)
	return c
}

// Healthy reports whether the last insert succeeded.
func (c *Consumer) Healthy() bool { return c.sinkOK.Load() }

// batch is what has been fetched and not yet committed.
type batch struct {
	msgs        int // fetched
	bytes       int // of the messages' values
	rows        chstore.EventBatch
	quarantined []chstore.QuarantineRow
	dead        []kafka.DeadLetter
	// due ends when the batch must be flushed; one context per batch, as
	// a timer per fetched message would cost more than the fetch.
	due    context.Context
	cancel context.CancelFunc
	// parts holds, for each partition the batch read from, the position
	// the commit names and the lag after the partition's latest message.
	parts []partition
	// last indexes the partition of the previous message: the reader
	// hands out a partition's messages in runs.
	last int
}

type partition struct {
	kafka.Position
	lag int64 // messages behind the partition's end after Position
}

// note records msg as the latest message of its partition in the batch.
func (b *batch) note(msg *kafka.Message) {
	p := b.partition(msg)
	// Offsets only grow within a partition, unless a rebalance delivers
	// messages again; the batch holds the later ones all the same.
	p.Offset = max(p.Offset, msg.Offset)
	p.lag = max(0, msg.HighWaterMark-msg.Offset-1)
}

func (b *batch) partition(msg *kafka.Message) *partition {
	if b.last < len(b.parts) {
		if p := &b.parts[b.last]; p.Partition == msg.Partition && p.Topic == msg.Topic {
			return p
		}
	}
	for i := range b.parts {
		if p := &b.parts[i]; p.Partition == msg.Partition && p.Topic == msg.Topic {
			b.last = i
			return p
		}
	}
	b.last = len(b.parts)
	b.parts = append(b.parts, partition{Position: kafka.Position{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}})
	return &b.parts[b.last]
}

func (b *batch) reset() {
	b.msgs, b.quarantined, b.bytes = 0, b.quarantined[:0], 0
	b.rows.Reset()
	clear(b.dead) // the messages' values can go
	b.dead = b.dead[:0]
	if b.cancel != nil {
		b.cancel()
	}
	b.due, b.cancel = nil, nil
	b.parts, b.last = b.parts[:0], 0
}

// Run consumes until ctx ends, then flushes and commits what it holds
// within the shutdown timeout. It returns nil after a clean stop.
func (c *Consumer) Run(ctx context.Context) error {
	b := new(batch)
	defer b.reset()
	for {
		fctx := ctx
		if b.due != nil {
			fctx = b.due
		}
		msg, err := c.src.Fetch(fctx)
		switch {
		case err == nil:
			c.add(ctx, b, &msg)
			if b.msgs < c.cfg.BatchRows && b.bytes < c.cfg.BatchBytes {
				continue
			}
		case ctx.Err() != nil:
			// Stopping: write and commit what was fetched, then return.
			sctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
			defer cancel()
			if err := c.flush(sctx, b); err != nil {
				return fmt.Errorf("final flush: %w", err)
			}
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			// The batch is due.
		default:
			c.log.Warn("fetch from Kafka failed", "err", err)
			backoff.Sleep(ctx, c.cfg.RetryMin)
			continue
		}
		// An error here means ctx ended mid-retry; the next fetch sees
		// that and flushes once more within the shutdown timeout.
		_ = c.flush(ctx, b)
	}
}

func (c *Consumer) add(ctx context.Context, b *batch, msg *kafka.Message) {
	if b.msgs == 0 {
		b.due, b.cancel = context.WithTimeout(ctx, c.cfg.FlushInterval)
	}
	b.msgs++
	b.bytes += len(msg.Value)
	b.note(msg)
	var err error
	if msg.Topic != "" && msg.Topic == c.cfg.QuarantineTopic {
		var q chstore.QuarantineRow
		if q, err = c.dec.DecodeQuarantine(msg.Value); err == nil {
			q.Partition, q.Offset = msg.Partition, msg.Offset
			b.quarantined = append(b.quarantined, q)
		}
	} else {
		var row int
		if row, err = c.dec.Decode(msg.Value, &b.rows); err == nil {
			b.rows.KafkaPartition[row], b.rows.KafkaOffset[row] = uint16(msg.Partition), uint64(msg.Offset)
		}
	}
	if err != nil {
		c.log.Warn("message cannot be decoded; sending it to the dead-letter topic",
			"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "err", err)
		b.dead = append(b.dead, kafka.DeadLetter{Message: *msg, Reason: err.Error()})
	}
}

// flush writes the batch, retrying until it succeeds or ctx ends, and then
// commits its offsets. Nothing is committed that was not written.
func (c *Consumer) flush(ctx context.Context, b *batch) error {
	if b.msgs == 0 {
		return nil
	}
	if len(b.dead) > 0 {
		if err := c.retry(ctx, opDeadLetter, func(ctx context.Context) error {
			return c.dlq.Write(ctx, b.dead)
		}); err != nil {
			return err
		}
		c.metrics.deadLetters.Add(float64(len(b.dead)))
		clear(b.dead)
		b.dead = b.dead[:0] // written; a retried flush must not send them again
	}
	if n := b.rows.Len(); n > 0 {
		err := c.retry(ctx, opInsert, func(ctx context.Context) error {
			start := time.Now()
			err := c.sink.InsertEvents(ctx, &b.rows)
			c.metrics.insertLatency.Observe(time.Since(start).Seconds())
			c.sinkOK.Store(err == nil)
			return err
		})
		if err != nil {
			return err
		}
		c.metrics.rows.Add(float64(n))
		c.metrics.batchSize.Observe(float64(n))
		written := time.Now()
		for _, received := range b.rows.ReceivedAt {
			// Clocks of ingest and consumer hosts may differ a little.
			c.metrics.freshness.Observe(max(0, written.Sub(received).Seconds()))
		}
		b.rows.Reset() // written; a retried flush must not insert them again
	}
	if len(b.quarantined) > 0 {
		if err := c.retry(ctx, opQuarantine, func(ctx context.Context) error {
			err := c.sink.InsertQuarantine(ctx, b.quarantined)
			c.sinkOK.Store(err == nil)
			return err
		}); err != nil {
			return err
		}
		for i := range b.quarantined {
			c.metrics.quarantined.WithLabelValues(b.quarantined[i].Reason).Inc()
		}
	}
	done := make([]kafka.Position, len(b.parts))
	for i, p := range b.parts {
		done[i] = p.Position
	}
	if err := c.src.Commit(ctx, done); err != nil {
		// The rows are written; if the commit is lost the messages come
		// again and their duplicates collapse by event ID.
		c.metrics.commitErrors.Inc()
		c.log.Warn("offset commit failed; the batch may be delivered again", "messages", b.msgs, "err", err)
	}
	for _, p := range b.parts {
		c.metrics.lag.WithLabelValues(p.Topic, strconv.Itoa(p.Partition)).Set(float64(p.lag))
	}
	b.reset()
	return nil
}

// The operations retried, as named in cms_consumer_retries_total.
const (
	opInsert     = "insert"
	opQuarantine = "quarantine insert"
	opDeadLetter = "dead-letter write"
)

// retry runs op until it succeeds or ctx ends, backing off exponentially.
func (c *Consumer) retry(ctx context.Context, what string, op func(context.Context) error) error {
	wait := backoff.Doubling{First: c.cfg.RetryMin, Longest: c.cfg.RetryMax}
	var failing time.Time
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			if attempt > 1 {
				// The counterpart of the warnings below, so that an outage's
				// end and length can be read from the log.
				c.log.Info(what+" recovered", "attempts", attempt, "failing_for", time.Since(failing).Round(time.Millisecond).String())
			}
			return nil
		}
		if attempt == 1 {
			failing = time.Now()
		}
		c.metrics.retries.WithLabelValues(what).Inc()
		c.log.Warn(what+" failed; retrying", "attempt", attempt, "in", wait.Next().String(), "err", err)
		if !wait.Wait(ctx) {
			return fmt.Errorf("%s: %w (gave up: %w)", what, err, ctx.Err())
		}
	}
}
