package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/produce"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// coalescer is the producer of the request path. kafka-go's Writer keeps a
// batch per partition and sends it when it is full or its timeout passes:
// with one small batch per HTTP request that is a produce request per
// partition every few milliseconds, each waiting out the timeout first. The
// coalescer keeps one queue per broker, across partitions and topics, and
// sends everything queued as one produce request as soon as fewer than
// maxInFlight requests to that broker are unanswered, and linger has passed
// since the last. Idle, a record goes at once; under load, requests grow
// with the load instead of multiplying.
type coalescer struct {
	client      *kafkago.Client
	transport   *kafkago.Transport
	cluster     Cluster
	topics      []string
	attrs       protocol.Attributes
	maxBytes    int64
	linger      time.Duration
	maxInFlight int
	log         *slog.Logger

	layout atomic.Pointer[layout]

	mu     sync.Mutex
	lanes  map[int32]*lane
	closed bool
	rounds sync.WaitGroup
}

// Limits of the coalescer's retries. The caller's context bounds a write;
// within it, retries ride out a leader change, which the transport learns
// of within metadataTTL, without failing the request. maxAttempts stops
// retries of a caller that set no deadline after about 10 s.
const (
	maxAttempts     = 40
	retryBackoffMin = 20 * time.Millisecond
	retryBackoffMax = 250 * time.Millisecond
	// metadataTTL is how often the transport reads the cluster's metadata
	// in the background; the transport routes each request by it.
	metadataTTL = time.Second
	// layoutMaxAge is how long partition leaders read from the transport's
	// metadata are used before they are read again (a copy, no round
	// trip).
	layoutMaxAge = time.Second
	// produceTimeout is the time the broker may take to replicate a
	// request's records; a round is not bounded by any one caller.
	produceTimeout = 30 * time.Second
)

// layout is what the coalescer knows of the topics' partitions.
type layout struct {
	at         time.Time
	partitions map[string][]int // by topic, sorted
	leaders    map[topicPartition]int32
}

type topicPartition struct {
	topic     string
	partition int32
}

// write is one caller's records, waiting for their acknowledgement.
type write struct {
	ctx       context.Context
	remaining int // entries not yet settled; guarded by coalescer.mu
	err       error
	done      chan struct{}
}

// entry is the records of one write for one partition: they travel, fail
// and are retried together.
type entry struct {
	w        *write
	tp       topicPartition
	recs     []event.Record
	bytes    int64
	attempts int
}

// lane is the queue of one broker.
type lane struct {
	leader   int32
	pending  []*entry
	inFlight int
	// backoff is set while the broker's last answer asked for a retry.
	backoff time.Duration
	// sent is when the last request to the broker took its records.
	sent time.Time
}

func newCoalescer(c Cluster, p ProducerConfig, topics ...string) (*coalescer, error) {
	codec, err := ParseCompression(p.Compression)
	if err != nil {
		return nil, err
	}
	t, err := c.transport()
	if err != nil {
		return nil, err
	}
	t.MetadataTTL = metadataTTL
	return &coalescer{
		client:      &kafkago.Client{Addr: kafkago.TCP(c.Brokers...), Transport: t},
		transport:   t,
		cluster:     c,
		topics:      topics,
		attrs:       protocol.Attributes(codec) & 7,
		maxBytes:    p.BatchBytes,
		linger:      p.Linger,
		maxInFlight: p.MaxInFlight,
		log:         p.Logger,
		lanes:       make(map[int32]*lane),
	}, nil
}

// errClosed is what writes get once the producer is closed.
var errClosed = errors.New("producer closed")

// publish returns once the brokers have acknowledged every record of sets,
// or with an error; after an error some records may have been stored. The
// records are the caller's and are read until the request that carries
// them is written, which may be after publish returned with an error.
func (c *coalescer) publish(ctx context.Context, sets ...topicRecords) error {
	l, err := c.currentLayout(ctx, false)
	if err != nil {
		return err
	}
	w := &write{ctx: ctx, done: make(chan struct{})}
	var entries []*entry
	for _, s := range sets {
		if entries, err = c.split(entries, w, l, s); err != nil {
			return err
		}
	}
	if len(entries) == 0 {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	w.remaining = len(entries)
	for _, e := range entries {
		c.enqueueLocked(l.leaders[e.tp], e)
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the brokers' acknowledgement: %w", context.Cause(ctx))
	}
}

type topicRecords struct {
	topic string
	recs  []event.Record
}

// split appends the entries of s to entries: one per partition its records
// hash to, by the Java client's murmur2 partitioner so that a key lands on
// the same partition whichever client wrote it. An entry stays within the
// request size.
func (c *coalescer) split(entries []*entry, w *write, l *layout, s topicRecords) ([]*entry, error) {
	if len(s.recs) == 0 {
		return entries, nil
	}
	parts := l.partitions[s.topic]
	if len(parts) == 0 {
		return entries, fmt.Errorf("topic %s has no partitions the brokers know of", s.topic)
	}
	first := len(entries)
	var bal kafkago.Murmur2Balancer
	var lastKey []byte
	var last *entry
	for i, r := range s.recs {
		var p int32
		if i > 0 && last != nil && string(r.Key) == string(lastKey) && r.Key != nil {
			p = last.tp.partition
		} else {
			p = int32(bal.Balance(kafkago.Message{Key: r.Key}, parts...))
		}
		lastKey = r.Key
		size := int64(len(r.Key) + len(r.Value) + recordOverhead)
		if last == nil || last.tp.partition != p || last.bytes+size > c.maxBytes {
			last = nil
			for _, e := range entries[first:] {
				if e.tp.partition == p && e.bytes+size <= c.maxBytes {
					last = e
					break
				}
			}
			if last == nil {
				last = &entry{w: w, tp: topicPartition{s.topic, p}}
				entries = append(entries, last)
			}
		}
		last.recs = append(last.recs, r)
		last.bytes += size
	}
	return entries, nil
}

// recordOverhead is a record's framing in a batch beside its key and value,
// counted generously.
const recordOverhead = 32

// enqueueLocked queues e for leader's broker and starts a round there if
// the broker may take one more.
func (c *coalescer) enqueueLocked(leader int32, e *entry) {
	ln := c.lanes[leader]
	if ln == nil {
		ln = &lane{leader: leader}
		c.lanes[leader] = ln
	}
	ln.pending = append(ln.pending, e)
	c.startLocked(ln)
}

func (c *coalescer) startLocked(ln *lane) {
	if len(ln.pending) == 0 || ln.inFlight >= c.maxInFlight {
		return
	}
	ln.inFlight++
	c.rounds.Add(1)
	go c.round(ln)
}

// round sends what ln has queued as one produce request and settles its
// entries, then starts the next round if records queued meanwhile.
func (c *coalescer) round(ln *lane) {
	defer c.rounds.Done()
	c.mu.Lock()
	wait := ln.backoff
	if wait == 0 && c.linger > 0 {
		// Requests to a broker are at least linger apart: records that
		// come sooner wait for the rest of it and go together, and a
		// record that finds the broker idle for longer goes at once.
		wait = time.Until(ln.sent.Add(c.linger))
	}
	c.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	c.mu.Lock()
	batch := c.takeLocked(ln)
	ln.sent = time.Now()
	c.mu.Unlock()

	var retry []*entry
	if len(batch) > 0 {
		retry = c.send(ln.leader, batch)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	ln.inFlight--
	ln.backoff = 0
	if len(retry) > 0 {
		ln.backoff = retryWait(retry[0].attempts)
		c.requeueLocked(retry)
	}
	c.startLocked(ln)
}

// takeLocked removes from ln's queue the entries of the next request, up to
// maxBytes, settling those whose caller stopped waiting.
func (c *coalescer) takeLocked(ln *lane) []*entry {
	var size int64
	n := 0
	for n < len(ln.pending) && (n == 0 || size+ln.pending[n].bytes <= c.maxBytes) {
		size += ln.pending[n].bytes
		n++
	}
	batch := make([]*entry, 0, n)
	for _, e := range ln.pending[:n] {
		if err := e.w.ctx.Err(); err != nil {
			c.settleLocked(e, fmt.Errorf("not sent: %w", err))
			continue
		}
		batch = append(batch, e)
	}
	ln.pending = slices.Delete(ln.pending, 0, n)
	return batch
}

// requeueLocked queues entries to retry again, at the front of their
// (possibly new) leader's queue, after that broker's backoff.
func (c *coalescer) requeueLocked(entries []*entry) {
	l := c.layout.Load()
	for _, e := range entries {
		leader, ok := l.leaders[e.tp]
		if !ok {
			leader = -1
		}
		ln := c.lanes[leader]
		if ln == nil {
			ln = &lane{leader: leader}
			c.lanes[leader] = ln
		}
		ln.pending = slices.Insert(ln.pending, 0, e)
		ln.backoff = max(ln.backoff, retryWait(e.attempts))
		c.startLocked(ln)
	}
}

// settleLocked records the outcome of e for its write.
func (c *coalescer) settleLocked(e *entry, err error) {
	w := e.w
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("write %d records to %s partition %d: %w", len(e.recs), e.tp.topic, e.tp.partition, err)
	}
	w.remaining--
	if w.remaining == 0 {
		close(w.done)
	}
}

// send writes batch to broker leader as one produce request and settles
// the entries that succeeded or failed for good. It returns those to retry.
func (c *coalescer) send(leader int32, batch []*entry) []*entry {
	req := c.request(batch)
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout+5*time.Second)
	defer cancel()
	m, err := c.transport.RoundTrip(ctx, c.client.Addr, req)
	outcome := make(map[topicPartition]error, len(batch))
	if err == nil {
		res, ok := m.(*produce.Response)
		if !ok {
			err = fmt.Errorf("unexpected answer %T to a produce request", m)
		} else {
			for _, t := range res.Topics {
				for _, p := range t.Partitions {
					var perr error
					if p.ErrorCode != 0 {
						perr = kafkago.Error(p.ErrorCode)
						if p.ErrorMessage != "" {
							perr = fmt.Errorf("%w: %s", perr, p.ErrorMessage)
						}
					}
					outcome[topicPartition{t.Topic, p.Partition}] = perr
				}
			}
		}
	}
	if err != nil {
		if e := c.cluster.explainKnown(err); e != nil {
			err = e
		}
	}

	var retry []*entry
	refresh := false
	c.mu.Lock()
	for _, e := range batch {
		eerr := err
		if eerr == nil {
			var ok bool
			if eerr, ok = outcome[e.tp]; !ok {
				eerr = errors.New("the broker's answer does not name this partition")
			}
		}
		if eerr == nil {
			c.settleLocked(e, nil)
			continue
		}
		e.attempts++
		if retriable(eerr) && e.attempts < maxAttempts && e.w.ctx.Err() == nil {
			retry = append(retry, e)
			refresh = true
			continue
		}
		c.settleLocked(e, eerr)
	}
	c.mu.Unlock()
	if refresh {
		c.log.Warn("kafka produce: retrying", "broker", leader, "entries", len(retry), "err", firstCause(err, outcome))
		// Leaders may have moved: read them again before routing the retries.
		if _, lerr := c.currentLayout(ctx, true); lerr != nil {
			c.log.Warn("kafka produce: reading partition leaders", "err", lerr)
		}
	}
	return retry
}

func firstCause(err error, outcome map[topicPartition]error) error {
	if err != nil {
		return err
	}
	for _, e := range outcome {
		if e != nil {
			return e
		}
	}
	return nil
}

// request builds the produce request of batch: per topic and partition, one
// record batch holding the entries' records in the order they were queued.
func (c *coalescer) request(batch []*entry) *produce.Request {
	now := time.Now()
	type partitionBatch struct {
		recs  []protocol.Record
		bytes int64
	}
	byTP := make(map[topicPartition]*partitionBatch, len(batch))
	var order []topicPartition
	for _, e := range batch {
		pb := byTP[e.tp]
		if pb == nil {
			pb = &partitionBatch{}
			byTP[e.tp] = pb
			order = append(order, e.tp)
		}
		for _, r := range e.recs {
			pb.recs = append(pb.recs, protocol.Record{Time: now, Key: protocol.NewBytes(r.Key), Value: protocol.NewBytes(r.Value)})
		}
		pb.bytes += e.bytes
	}
	req := &produce.Request{Acks: int16(kafkago.RequireAll), Timeout: int32(produceTimeout / time.Millisecond)}
	for _, tp := range order {
		pb := byTP[tp]
		attrs := c.attrs
		if pb.bytes < compressMinBytes {
			attrs = 0
		}
		i := slices.IndexFunc(req.Topics, func(t produce.RequestTopic) bool { return t.Topic == tp.topic })
		if i < 0 {
			req.Topics = append(req.Topics, produce.RequestTopic{Topic: tp.topic})
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, produce.RequestPartition{
			Partition: tp.partition,
			RecordSet: protocol.RecordSet{Attributes: attrs, Records: protocol.NewRecordReader(pb.recs...)},
		})
	}
	return req
}

// compressMinBytes is the smallest record batch that is compressed. A few
// records compress to little less, and setting up the codec costs as much
// as compressing many: at one small event per request, lz4 on every batch
// took about 15% more of ingest's CPU than none.
const compressMinBytes = 4 << 10

// retriable reports whether a produce error may pass: a leader moving, a
// replica catching up, a connection lost.
func retriable(err error) bool {
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var pe *produce.Error
	if errors.As(err, &pe) {
		// The transport's routing failed: its metadata is behind.
		return true
	}
	if errors.Is(err, ErrAuthenticationFailed) {
		return false
	}
	// Network errors: the transport drops the connection and dials again.
	return !errors.Is(err, context.Canceled)
}

// retryWait is the wait before a retry's attempt: doubling, bounded.
func retryWait(attempt int) time.Duration {
	d := retryBackoffMin << max(attempt-1, 0)
	return min(d, retryBackoffMax)
}

// currentLayout returns the partitions and leaders of the topics, read
// again when older than layoutMaxAge or when force is set.
func (c *coalescer) currentLayout(ctx context.Context, force bool) (*layout, error) {
	l := c.layout.Load()
	if l != nil && !force && time.Since(l.at) < layoutMaxAge {
		return l, nil
	}
	md, err := c.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: c.topics})
	if err != nil {
		if e := c.cluster.explainKnown(err); e != nil {
			err = e
		}
		if l != nil && !force {
			// The last layout still routes; the brokers say which
			// partitions moved.
			return l, nil
		}
		return nil, fmt.Errorf("read partition leaders of %v: %w", c.topics, err)
	}
	nl := &layout{at: time.Now(), partitions: make(map[string][]int, len(md.Topics)), leaders: make(map[topicPartition]int32)}
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("read partition leaders of %s: %w", t.Name, t.Error)
		}
		ps := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ps = append(ps, p.ID)
			nl.leaders[topicPartition{t.Name, int32(p.ID)}] = int32(p.Leader.ID)
		}
		slices.Sort(ps)
		nl.partitions[t.Name] = ps
	}
	c.layout.Store(nl)
	return nl, nil
}

// close waits for the rounds under way, then refuses writes.
func (c *coalescer) close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.rounds.Wait()
	c.transport.CloseIdleConnections()
	return nil
}
