package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/backoff"
	"github.com/assistantcms/cms/pkg/ratelimit"
	kafkago "github.com/segmentio/kafka-go"
)

// TailConfig configures a Tail. Zero durations take the defaults below.
type TailConfig struct {
	Topics []string
	// MaxMessageBytes is the largest record the topics take; every fetch
	// has room for at least one of them. Zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// MaxWait bounds how long one fetch waits for new records: how late a
	// record may be handed on when few are written.
	MaxWait time.Duration
	// MinBytes is how much a fetch waits for, within MaxWait: fewer,
	// larger fetches cost less per record when many are written.
	MinBytes int
	// RetryWait is the first wait before reaching a partition again after
	// a failure; it doubles on each failure up to MaxRetryWait.
	RetryWait time.Duration
	// MaxRecordsPerSecond bounds how many records the tail reads a
	// second, over all partitions (0: every record). A partition further
	// behind than the allowance skips to its newest records, and the
	// records passed over are reported (TailHandler.Unread): a person
	// watching sees a sample, and reading costs what the allowance does,
	// not what the producers write.
	MaxRecordsPerSecond int
}

// Defaults for TailConfig.
const (
	DefaultTailMaxWait   = 250 * time.Millisecond
	DefaultTailMinBytes  = 512 << 10
	DefaultTailRetryWait = 250 * time.Millisecond
	// MaxRetryWait bounds the wait between attempts, so that a tail finds
	// a broker that is back within seconds.
	MaxRetryWait = 4 * time.Second
	// fetchSlack is how much longer than MaxWait a fetch may take before
	// the connection counts as lost.
	fetchSlack = 15 * time.Second
)

// TailHandler receives what a Tail reads. Its methods are called from one
// goroutine per partition, concurrently; Interrupted and Reading are
// called one at a time, in the order the changes happened.
type TailHandler interface {
	// Messages are the records of one fetch of one partition, in order;
	// the handler may keep them.
	Messages(ms []Message)
	// Interrupted says a partition stopped being read, and why; the tail
	// tries again until its context ends. It is called once per
	// interruption, however many partitions it hit.
	Interrupted(err error)
	// Reading says every partition is being read: the first time, and
	// again after an interruption.
	Reading(r Resumption)
	// Unread says n records were passed over, not read, to keep within
	// TailConfig.MaxRecordsPerSecond. Called like Messages.
	Unread(n int64)
}

// Resumption describes a Reading: what the tail could not read.
type Resumption struct {
	// First is true the first time every partition is read.
	First bool
	// Lost is true when some partition could not go on from the last
	// record read: the broker no longer holds the records after it (a
	// broker restarted without its data, a topic created again, records
	// deleted by retention while the tail was away). The tail skipped to
	// the partition's newest record; the records in between are not shown.
	Lost bool
}

// Tail reads topics from their newest records on, as they are written:
// no consumer group, no committed offsets. Every reader of a topic sees
// the same records, whichever producer wrote them.
type Tail struct {
	cfg     TailConfig
	dialer  *kafkago.Dialer
	brokers []string
	budget  *ratelimit.Pace // nil: every record is read
}

// NewTail returns a tail of the topics in tc; nothing connects before Run.
func (c Cluster) NewTail(tc TailConfig) (*Tail, error) {
	dialer, err := c.dialer()
	if err != nil {
		return nil, err
	}
	if len(tc.Topics) == 0 {
		return nil, errors.New("a tail needs topics")
	}
	if tc.MaxMessageBytes <= 0 {
		tc.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if tc.MaxWait <= 0 {
		tc.MaxWait = DefaultTailMaxWait
	}
	if tc.MinBytes <= 0 {
		tc.MinBytes = DefaultTailMinBytes
	}
	if tc.RetryWait <= 0 {
		tc.RetryWait = DefaultTailRetryWait
	}
	if tc.MaxRecordsPerSecond < 0 {
		return nil, fmt.Errorf("a tail's records a second must not be negative, got %d", tc.MaxRecordsPerSecond)
	}
	t := &Tail{cfg: tc, dialer: dialer, brokers: c.Brokers}
	if tc.MaxRecordsPerSecond > 0 {
		// Saved up to a quarter of a second's worth, so that what is read,
		// and shown, comes evenly rather than in a burst a second; shared
		// by every partition's reader.
		t.budget = ratelimit.NewPace(float64(tc.MaxRecordsPerSecond), float64(tc.MaxRecordsPerSecond)/4)
	}
	return t, nil
}

// Run reads every partition of the topics from its newest record on and
// hands what it reads to h, until ctx ends. A broker that cannot be
// reached, or a connection lost, is reported to h and tried again: Run
// returns only when ctx ends.
func (t *Tail) Run(ctx context.Context, h TailHandler) {
	st := &tailState{h: h, first: true}
	var parts []kafkago.Partition
	wait := backoff.Doubling{First: t.cfg.RetryWait, Longest: MaxRetryWait}
	for attempt := 0; ; attempt++ {
		var err error
		if parts, err = t.partitions(ctx, attempt); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		st.interrupt(fmt.Errorf("read the partitions of %v: %w", t.cfg.Topics, err))
		if !wait.Wait(ctx) {
			return
		}
	}
	st.mu.Lock()
	st.down = len(parts)
	st.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { t.readPartition(ctx, p.Topic, p.ID, st) })
	}
	wg.Wait()
}

// partitions lists the partitions of the topics, asking the brokers in
// turn.
func (t *Tail) partitions(ctx context.Context, attempt int) ([]kafkago.Partition, error) {
	conn, err := t.dialer.DialContext(ctx, "tcp", t.brokers[attempt%len(t.brokers)])
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	parts, err := conn.ReadPartitions(t.cfg.Topics...)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for _, p := range parts {
		found[p.Topic] = true
	}
	for _, topic := range t.cfg.Topics {
		if !found[topic] {
			return nil, fmt.Errorf("topic %s does not exist", topic)
		}
	}
	return parts, nil
}

// readPartition reads one partition until ctx ends, connecting again
// after each failure.
func (t *Tail) readPartition(ctx context.Context, topic string, partition int, st *tailState) {
	next := int64(-1) // the newest record, the first time
	wait := backoff.Doubling{First: t.cfg.RetryWait, Longest: MaxRetryWait}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		conn, lost, err := t.position(ctx, topic, partition, attempt, &next)
		if err == nil {
			st.up(lost)
			wait.Reset()
			err = t.read(ctx, conn, &next, st.h)
			conn.Close()
			if ctx.Err() != nil {
				return
			}
			st.down1(fmt.Errorf("read %s/%d: %w", topic, partition, err))
		} else if ctx.Err() == nil {
			st.interrupt(fmt.Errorf("reach %s/%d: %w", topic, partition, err))
		}
		if !wait.Wait(ctx) {
			return
		}
	}
}

// position connects to the partition's leader and decides where reading
// goes on: from *next when the broker still holds it, else from the
// newest record (lost).
func (t *Tail) position(ctx context.Context, topic string, partition, attempt int, next *int64) (*kafkago.Conn, bool, error) {
	conn, err := t.dialer.DialLeader(ctx, "tcp", t.brokers[attempt%len(t.brokers)], topic, partition)
	if err != nil {
		return nil, false, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	first, last, err := conn.ReadOffsets()
	if err != nil {
		conn.Close()
		return nil, false, err
	}
	_ = conn.SetDeadline(time.Time{})
	lost := false
	switch {
	case *next < 0:
		*next = last
	case *next < first || *next > last:
		lost = true
		*next = last
	}
	return conn, lost, nil
}

// read fetches from conn at *next, handing each record to h and moving
// *next past it, until the connection fails or ctx ends.
func (t *Tail) read(ctx context.Context, conn *kafkago.Conn, next *int64, h TailHandler) error {
	// Closing the connection is what ends a fetch in flight.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	maxBytes := max(16<<20, t.cfg.MaxMessageBytes+1<<20)
	minBytes := min(t.cfg.MinBytes, maxBytes)
	var ms []Message
	hwm := int64(-1) // the partition's end at the last fetch; unknown before
	for {
		if t.budget != nil {
			if err := t.keepWithin(ctx, conn, next, hwm, h); err != nil {
				return err
			}
		}
		if _, err := conn.Seek(*next, kafkago.SeekAbsolute|kafkago.SeekDontCheck); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(t.cfg.MaxWait + fetchSlack))
		b := conn.ReadBatchWith(kafkago.ReadBatchConfig{MinBytes: minBytes, MaxBytes: maxBytes, MaxWait: t.cfg.MaxWait})
		ms = ms[:0]
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			*next = m.Offset + 1
			out := Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, HighWaterMark: m.HighWaterMark, Key: m.Key, Value: m.Value}
			if len(m.Headers) > 0 {
				out.Headers = make([]Header, len(m.Headers))
				for i, hd := range m.Headers {
					out.Headers[i] = Header{Key: hd.Key, Value: hd.Value}
				}
			}
			ms = append(ms, out)
		}
		hwm = b.HighWaterMark()
		if len(ms) > 0 {
			if t.budget != nil {
				t.budget.Spend(len(ms))
			}
			h.Messages(ms)
			clear(ms) // the handler keeps what it wants; this slice is reused
		}
		// An empty fetch (nothing new within MaxWait) ends the batch with
		// RequestTimedOut; anything else ends the connection.
		if err := b.Close(); err != nil && !errors.Is(err, kafkago.RequestTimedOut) {
			return err
		}
	}
}

// keepWithin waits for the read budget to allow a record, then, when the
// partition is further behind (as of the last fetch, hwm) than the budget
// allows, moves *next to the newest records the budget allows and
// reports the records passed over.
func (t *Tail) keepWithin(ctx context.Context, conn *kafkago.Conn, next *int64, hwm int64, h TailHandler) error {
	allowed, waited, err := t.budget.Wait(ctx)
	if err != nil {
		return err
	}
	if hwm < 0 || (!waited && hwm-*next <= allowed) {
		return nil // not behind as of the last fetch, which was just now
	}
	// Where the partition ends now, not when last fetched.
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	last, err := conn.ReadLastOffset()
	_ = conn.SetDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("read the newest offset: %w", err)
	}
	if skip := last - allowed - *next; skip > 0 {
		*next += skip
		h.Unread(skip)
	}
	return nil
}

// tailState counts the partitions not being read, to report one
// interruption however many partitions it hit, and one resumption once
// they are all read again.
type tailState struct {
	mu    sync.Mutex
	h     TailHandler
	down  int
	first bool
	// interrupted: Interrupted was reported since the last Reading.
	interrupted bool
	lost        bool
}

// up records a partition being read again.
func (s *tailState) up(lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down--
	s.lost = s.lost || lost
	if s.down > 0 {
		return
	}
	r := Resumption{First: s.first, Lost: s.lost}
	s.first, s.lost, s.interrupted = false, false, false
	s.h.Reading(r)
}

// down1 records a partition that was read and no longer is.
func (s *tailState) down1(err error) {
	s.mu.Lock()
	s.down++
	s.mu.Unlock()
	s.interrupt(err)
}

// interrupt reports err unless an interruption is already reported.
func (s *tailState) interrupt(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interrupted {
		return
	}
	s.interrupted = true
	s.h.Interrupted(err)
}
