package kafka

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// tailRecorder is a TailHandler that keeps what it is told.
type tailRecorder struct {
	mu       sync.Mutex
	values   []string
	unread   int64
	changes  []string // "interrupted" and "reading", "reading first", "reading lost"
	changed  chan struct{}
	received chan struct{}
	errs     []string
}

func newTailRecorder() *tailRecorder {
	return &tailRecorder{changed: make(chan struct{}, 100), received: make(chan struct{}, 100_000)}
}

func (r *tailRecorder) Messages(ms []Message) {
	for _, m := range ms {
		r.mu.Lock()
		r.values = append(r.values, m.Topic+":"+string(m.Value))
		r.mu.Unlock()
		r.received <- struct{}{}
	}
}

func (r *tailRecorder) Unread(n int64) {
	r.mu.Lock()
	r.unread += n
	r.mu.Unlock()
}

// counted is how many records were read and passed over.
func (r *tailRecorder) counted() (read, unread int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.values)), r.unread
}

func (r *tailRecorder) Interrupted(err error) {
	r.mu.Lock()
	r.changes = append(r.changes, "interrupted")
	r.errs = append(r.errs, err.Error())
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *tailRecorder) Reading(res Resumption) {
	s := "reading"
	if res.First {
		s += " first"
	}
	if res.Lost {
		s += " lost"
	}
	r.mu.Lock()
	r.changes = append(r.changes, s)
	r.mu.Unlock()
	r.changed <- struct{}{}
}

// mark is the number of changes so far: waitChange(since) looks only at
// those that come after it.
func (r *tailRecorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes)
}

// waitState waits until the latest change begins with want and returns
// the changes after since. A broker that stops or starts is not one
// event: its connections end one by one, and the tail may report several
// changes while it does.
func (r *tailRecorder) waitState(t *testing.T, since int, want string, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		r.mu.Lock()
		if n := len(r.changes); n > since && strings.HasPrefix(r.changes[n-1], want) {
			defer r.mu.Unlock()
			return append([]string(nil), r.changes[since:]...)
		}
		r.mu.Unlock()
		select {
		case <-r.changed:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("the tail is not %q within %s; changes %v, errors %q", want, limit, r.changes, r.errs)
		}
	}
}

func (r *tailRecorder) changesSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.changes...)
}

// waitValues waits for n messages and returns every value read, sorted.
func (r *tailRecorder) waitValues(t *testing.T, n int, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for i := 0; i < n; i++ {
		select {
		case <-r.received:
		case <-deadline:
			t.Fatalf("%d of %d records read within %s: %v", i, n, limit, r.sortedValues())
		}
	}
	return r.sortedValues()
}

func (r *tailRecorder) sortedValues() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := append([]string(nil), r.values...)
	sort.Strings(v)
	return v
}

func records(prefix string, n int) []event.Record {
	var out []event.Record
	for i := range n {
		out = append(out, event.Record{Key: []byte("app/s" + strconv.Itoa(i)), Value: []byte(prefix + strconv.Itoa(i))})
	}
	return out
}

func expected(topic, prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, topic+":"+prefix+strconv.Itoa(i))
	}
	return out
}

func runTail(t *testing.T, cl Cluster, topics ...string) *tailRecorder {
	t.Helper()
	return runTailWith(t, cl, TailConfig{Topics: topics})
}

func runTailWith(t *testing.T, cl Cluster, tc TailConfig) *tailRecorder {
	t.Helper()
	tc.MaxWait, tc.MinBytes, tc.RetryWait = 50*time.Millisecond, 1, 20*time.Millisecond
	tail, err := cl.NewTail(tc)
	if err != nil {
		t.Fatal(err)
	}
	rec := newTailRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tail.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the tail did not stop within 10s of its context's end")
		}
	})
	return rec
}

// tailCluster is a cluster with the topics ev and q, and a producer of
// both.
func tailCluster(t *testing.T) (Cluster, *Producer) {
	t.Helper()
	cl := newCluster(t, "ev", "q")
	p, err := cl.NewProducer(ProducerConfig{}, "ev", "q")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return cl, p
}

// TestTailReadsFromTheNewest: records written before the tail reads every
// partition are not read; every record written after is read once.
func TestTailReadsFromTheNewest(t *testing.T) {
	cl, p := tailCluster(t)
	ctx := t.Context()
	if err := p.Publish(ctx, records("old", 20), records("oldq", 3)); err != nil {
		t.Fatal(err)
	}
	rec := runTail(t, cl, "ev", "q")
	if got := rec.waitState(t, 0, "reading", 30*time.Second); got[0] != "reading first" {
		t.Fatalf("changes %q, want reading first", got)
	}
	if err := p.Publish(ctx, records("new", 30), records("newq", 4)); err != nil {
		t.Fatal(err)
	}
	want := append(expected("ev", "new", 30), expected("q", "newq", 4)...)
	sort.Strings(want)
	got := rec.waitValues(t, len(want), 30*time.Second)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v,\nwant %v", got, want)
	}
	select {
	case <-rec.received:
		t.Errorf("more records read than written: %v", rec.sortedValues())
	case <-time.After(200 * time.Millisecond):
	}
	// Idle fetches (nothing new within MaxWait) are no interruption.
	if got := rec.changesSoFar(); !slices.Equal(got, []string{"reading first"}) {
		t.Errorf("changes %q, want reading first alone; errors %q", got, rec.errs)
	}
}

// TestTailKeepsWithinItsBudget: once the tail has read its allowance,
// records written faster than it may read are partly passed over; every
// record is either read or reported unread, none twice; and records
// written within the allowance are all read.
func TestTailKeepsWithinItsBudget(t *testing.T) {
	cl, p := tailCluster(t)
	ctx := t.Context()
	const budget, first, rest = 400, 500, 5500
	rec := runTailWith(t, cl, TailConfig{Topics: []string{"ev", "q"}, MaxRecordsPerSecond: budget})
	rec.waitState(t, 0, "reading", 30*time.Second)
	began := time.Now()
	// More than the allowance saved up: the tail reads them and owes the
	// rest.
	if err := p.Publish(ctx, records("first-", first), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for read, unread := rec.counted(); read+unread < budget; read, unread = rec.counted() {
		if time.Now().After(deadline) {
			t.Fatalf("%d read and %d unread of %d written", read, unread, first)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range rest / 500 {
		if err := p.Publish(ctx, records(fmt.Sprintf("rest%d-", i), 500), nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(60 * time.Second)
	read, unread := rec.counted()
	for read+unread < first+rest {
		if time.Now().After(deadline) {
			t.Fatalf("%d read and %d unread of %d written", read, unread, first+rest)
		}
		time.Sleep(10 * time.Millisecond)
		read, unread = rec.counted()
	}
	t.Logf("%d read and %d unread of %d written in %s", read, unread, first+rest, time.Since(began).Round(time.Millisecond))
	// Each of the two partitions may take the whole allowance at once.
	most := int64(first + 2*budget*(1+time.Since(began).Seconds()))
	if read+unread != first+rest || unread == 0 || read > most {
		t.Errorf("%d read and %d unread of %d written; want each once, some unread and at most %d read", read, unread, first+rest, most)
	}
	vals := rec.sortedValues()
	if d := slices.Compact(slices.Clone(vals)); len(d) != len(vals) {
		t.Errorf("a record was read twice")
	}
	// Within the allowance again (it refills in a quarter of a second):
	// all is read.
	time.Sleep(time.Second)
	_, unreadBefore := rec.counted()
	if err := p.Publish(ctx, records("calm", 20), records("calmq", 5)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for read, _ := rec.counted(); read < int64(len(vals)+25); read, _ = rec.counted() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 25 records written within the allowance read", read-int64(len(vals)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, u := rec.counted(); u != unreadBefore {
		t.Errorf("%d more unread within the allowance", u-unreadBefore)
	}
}

func TestTailRefusesNoTopics(t *testing.T) {
	if _, err := (Cluster{Brokers: []string{"127.0.0.1:1"}}).NewTail(TailConfig{}); err == nil {
		t.Error("a tail of no topics was made")
	}
	if _, err := (Cluster{}).NewTail(TailConfig{Topics: []string{"a"}}); err == nil {
		t.Error("a tail of no brokers was made")
	}
}

// TestTailAcrossBrokerRestarts stops the development broker under a tail:
// the tail says it was interrupted, and once the broker is back it reads
// on from where it stopped. A broker that comes back without its data is
// reported as records lost.
func TestTailAcrossBrokerRestarts(t *testing.T) {
	dataDir := t.TempDir()
	ctx := context.Background()
	b, err := devbroker.Start(ctx, brokerBin, devbroker.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop() }()
	cl := Cluster{Brokers: []string{b.Addr()}}
	specs := []TopicSpec{{Name: "ev", Partitions: 3, ReplicationFactor: 1}, {Name: "q", Partitions: 1, ReplicationFactor: 1}}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatal(err)
	}
	publish := func(prefix string, n int) {
		t.Helper()
		p, err := cl.NewProducer(ProducerConfig{}, "ev", "q")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := p.Publish(pctx, records(prefix, n), nil); err != nil {
			t.Fatal(err)
		}
	}
	publish("before", 10)
	rec := runTail(t, cl, "ev", "q")
	if got := rec.waitState(t, 0, "reading", 30*time.Second); got[0] != "reading first" {
		t.Fatalf("changes %q, want reading first", got)
	}
	publish("a", 10)
	rec.waitValues(t, 10, 30*time.Second)

	stopping := rec.mark()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	rec.waitState(t, stopping, "interrupted", 30*time.Second)
	started := rec.mark()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.waitState(t, started, "reading", 30*time.Second); slices.ContainsFunc(got, func(c string) bool { return strings.Contains(c, "lost") }) {
		t.Fatalf("after the broker came back with its data: %q, want reading with nothing lost", got)
	}
	publish("b", 10)
	got := rec.waitValues(t, 10, 30*time.Second)
	want := append(expected("ev", "a", 10), expected("ev", "b", 10)...)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v,\nwant %v", got, want)
	}

	// Without its data, the broker starts again from offset 0: what the
	// tail read last is past the end of every partition.
	stopping = rec.mark()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	rec.waitState(t, stopping, "interrupted", 30*time.Second)
	started = rec.mark()
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(dataDir + "/" + e.Name()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EnsureTopics(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if got := rec.waitState(t, started, "reading", 30*time.Second); !slices.Contains(got, "reading lost") {
		t.Fatalf("after the broker came back without its data: %q, want reading lost", got)
	}
	publish("c", 5)
	got = rec.waitValues(t, 5, 30*time.Second)
	want = append(want, expected("ev", "c", 5)...)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v,\nwant %v", got, want)
	}
}
