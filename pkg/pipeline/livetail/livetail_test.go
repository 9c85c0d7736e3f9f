package livetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

const (
	eventsTopic     = "ev"
	quarantineTopic = "q"
)

// fakeSource is a Source that reads nothing: tests hand the hub records
// themselves. It counts its runs and tells when one ends.
type fakeSource struct {
	mu      sync.Mutex
	runs    int
	running int
	ended   chan struct{}
}

func newFakeSource() *fakeSource { return &fakeSource{ended: make(chan struct{}, 10)} }

func (f *fakeSource) Run(ctx context.Context, _ kafka.TailHandler) {
	f.mu.Lock()
	f.runs++
	f.running++
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
	f.ended <- struct{}{}
}

func (f *fakeSource) counts() (runs, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs, f.running
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newHub(t *testing.T, cfg Config) (*Hub, *fakeSource, *clock) {
	t.Helper()
	cfg.EventsTopic, cfg.QuarantineTopic = eventsTopic, quarantineTopic
	src := newFakeSource()
	h := NewHub(cfg, src, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := &clock{t: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
	h.now = c.now
	t.Cleanup(h.Close)
	return h, src, c
}

// ev is an event for the tests' records.
type ev struct {
	app, id, typ, name, session, user string
}

// envelope is the events-topic record of e, as ingest writes it.
func envelope(e ev) kafka.Message {
	event := map[string]any{"appId": e.app, "type": e.typ, "name": e.name, "payload": map[string]any{"n": 1}}
	if e.session != "" {
		event["sessionId"] = e.session
	}
	if e.user != "" {
		event["userId"] = e.user
	}
	v, _ := json.Marshal(map[string]any{"v": 1, "eventId": e.id, "appId": e.app, "organizationId": "org",
		"receivedAt": "2026-05-06T07:08:09.120Z", "event": event})
	return kafka.Message{Topic: eventsTopic, Key: []byte(e.app + "/" + e.session), Value: v}
}

// quarantined is the quarantine record of e, refused for its name.
func quarantined(e ev) kafka.Message {
	v, _ := json.Marshal(map[string]any{"v": 1, "appId": e.app, "organizationId": "org", "receivedAt": "2026-05-06T07:08:09.120Z",
		"index": 0, "eventId": e.id, "errors": []map[string]string{{"field": "name", "reason": "too_long", "message": "too long"}},
		"event": map[string]any{"appId": e.app, "type": e.typ, "name": e.name, "sessionId": e.session}})
	return kafka.Message{Topic: quarantineTopic, Key: []byte(e.app), Value: v}
}

// drain returns the IDs of the events queued for w, and the states.
func drain(t *testing.T, w *Watcher) (ids []string, states []State) {
	t.Helper()
	for {
		select {
		case it := <-w.Items():
			switch it.Kind {
			case KindEvent:
				var e Event
				if err := json.Unmarshal(it.Data, &e); err != nil {
					t.Fatalf("an event item is not an Event: %v: %s", err, it.Data)
				}
				ids = append(ids, e.EventID)
			case KindState:
				var s State
				if err := json.Unmarshal(it.Data, &s); err != nil {
					t.Fatal(err)
				}
				states = append(states, s)
			}
		default:
			return ids, states
		}
	}
}

func watch(t *testing.T, h *Hub, org, app string, f Filter) *Watcher {
	t.Helper()
	w, err := h.Watch(org, app, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func TestEventsGoToTheirAppOnly(t *testing.T) {
	h, _, _ := newHub(t, Config{EventsPerSecond: 1000})
	a1, a2 := watch(t, h, "org", "a", Filter{}), watch(t, h, "org", "a", Filter{})
	b := watch(t, h, "org2", "b", Filter{})
	var wantA, wantB []string
	for i := range 10 {
		id := fmt.Sprintf("a%d", i)
		h.Message(envelope(ev{app: "a", id: id, typ: "REQUEST", name: "N", session: "s"}))
		wantA = append(wantA, id)
		if i%3 == 0 {
			id := fmt.Sprintf("b%d", i)
			h.Message(quarantined(ev{app: "b", id: id, typ: "REQUEST", name: "N"}))
			wantB = append(wantB, id)
		}
		h.Message(envelope(ev{app: "c", id: fmt.Sprintf("c%d", i), typ: "REQUEST", name: "N", session: "s"}))
	}
	// A record whose key names app a but whose envelope is app b's is
	// shown to neither: the envelope is the truth, the key a shortcut.
	lying := envelope(ev{app: "b", id: "liar", typ: "REQUEST", name: "N", session: "s"})
	lying.Key = []byte("a/s")
	h.Message(lying)
	// Another topic's records are none of the view's.
	other := envelope(ev{app: "a", id: "elsewhere", typ: "REQUEST", name: "N", session: "s"})
	other.Topic = "dead-letter"
	h.Message(other)
	for name, tc := range map[string]struct {
		w    *Watcher
		want []string
	}{"a1": {a1, wantA}, "a2": {a2, wantA}, "b": {b, wantB}} {
		got, _ := drain(t, tc.w)
		if !slices.Equal(got, tc.want) {
			t.Errorf("watcher %s got %v, want %v", name, got, tc.want)
		}
	}
}

func TestEventsASecondAndCounts(t *testing.T) {
	h, _, clk := newHub(t, Config{EventsPerSecond: 5})
	w := watch(t, h, "org", "a", Filter{})
	send := func(n int, prefix string) {
		for i := range n {
			h.Message(envelope(ev{app: "a", id: fmt.Sprintf("%s%d", prefix, i), typ: "T", name: "N", session: "s"}))
		}
	}
	send(20, "x")
	got, _ := drain(t, w)
	if !slices.Equal(got, []string{"x0", "x1", "x2", "x3", "x4"}) {
		t.Errorf("a burst of 20 showed %v, want the first 5", got)
	}
	if c := w.TakeCounts(); c != (Counts{Seen: 20, Shown: 5, Skipped: 15}) {
		t.Errorf("counts %+v, want 20 seen, 5 shown, 15 skipped", c)
	}
	// 0.4 s later two events are allowed again; a second later five.
	clk.advance(400 * time.Millisecond)
	send(10, "y")
	if got, _ := drain(t, w); !slices.Equal(got, []string{"y0", "y1"}) {
		t.Errorf("0.4 s later: %v, want 2 events", got)
	}
	clk.advance(10 * time.Second)
	send(10, "z")
	if got, _ := drain(t, w); len(got) != 5 {
		t.Errorf("after 10 s: %d events, want a burst of 5, not more", len(got))
	}
	if c := w.TakeCounts(); c != (Counts{Seen: 20, Shown: 7, Skipped: 13}) {
		t.Errorf("counts %+v, want 20 seen, 7 shown, 13 skipped", c)
	}
	if c := w.TakeCounts(); c != (Counts{}) {
		t.Errorf("counts right after being taken: %+v, want zero", c)
	}
}

// TestUnreadCounts: records the tail passed over are counted in the next
// counts of every watcher, once, and not in those of a watcher that
// came after.
func TestUnreadCounts(t *testing.T) {
	h, _, _ := newHub(t, Config{})
	a, b := watch(t, h, "org", "a", Filter{}), watch(t, h, "org", "b", Filter{})
	h.Unread(300)
	h.Unread(12)
	late := watch(t, h, "org", "a", Filter{})
	for name, w := range map[string]*Watcher{"a": a, "b": b} {
		if c := w.TakeCounts(); c != (Counts{Unread: 312}) {
			t.Errorf("watcher %s: counts %+v, want 312 unread", name, c)
		}
		if c := w.TakeCounts(); c != (Counts{}) {
			t.Errorf("watcher %s: counts right after being taken: %+v, want zero", name, c)
		}
	}
	if c := late.TakeCounts(); c != (Counts{}) {
		t.Errorf("a watcher that came after: counts %+v, want zero", c)
	}
}

func TestFilters(t *testing.T) {
	h, _, _ := newHub(t, Config{EventsPerSecond: 1000})
	watchers := map[string]*Watcher{
		"all":         watch(t, h, "org", "a", Filter{}),
		"type":        watch(t, h, "org", "a", Filter{Type: "ERROR"}),
		"name":        watch(t, h, "org", "a", Filter{Name: "LAUNCH_REQUEST"}),
		"session":     watch(t, h, "org", "a", Filter{SessionID: "s2"}),
		"user":        watch(t, h, "org", "a", Filter{UserID: "ü"}),
		"quarantined": watch(t, h, "org", "a", Filter{Quarantined: true}),
		"both":        watch(t, h, "org", "a", Filter{Type: "REQUEST", Quarantined: true}),
	}
	h.Message(envelope(ev{app: "a", id: "1", typ: "REQUEST", name: "LAUNCH_REQUEST", session: "s1", user: "u"}))
	h.Message(envelope(ev{app: "a", id: "2", typ: "ERROR", name: "E", session: "s2", user: "ü"}))
	h.Message(quarantined(ev{app: "a", id: "3", typ: "REQUEST", name: "LAUNCH_REQUEST", session: "s2"}))
	h.Message(quarantined(ev{app: "a", id: "4", typ: "ERROR", name: "X", session: "s3"}))
	// Escaped in the record as sent: the filter compares values.
	esc := kafka.Message{Topic: eventsTopic, Key: []byte("a/s9"), Value: []byte(
		`{"v":1,"eventId":"5","appId":"a","organizationId":"org","receivedAt":"2026-05-06T07:08:09.120Z","event":{"appId":"a","type":"\u0045RROR","name":"E","user\u0049d":"\u00fc"}}`)}
	h.Message(esc)
	want := map[string][]string{
		"all": {"1", "2", "3", "4", "5"}, "type": {"2", "4", "5"}, "name": {"1", "3"}, "session": {"2", "3"},
		"user": {"2", "5"}, "quarantined": {"3", "4"}, "both": {"3"},
	}
	for name, w := range watchers {
		if got, _ := drain(t, w); !slices.Equal(got, want[name]) {
			t.Errorf("filter %s: %v, want %v", name, got, want[name])
		}
	}
	// Seen counts what passed the filter.
	if c := watchers["session"].TakeCounts(); c.Seen != 2 || c.Shown != 2 {
		t.Errorf("session filter counts %+v, want 2 seen and shown", c)
	}
}

func TestSlowWatcherDroppedOthersServed(t *testing.T) {
	h, _, _ := newHub(t, Config{EventsPerSecond: 1000, QueueLength: 4})
	slow := watch(t, h, "org", "a", Filter{})
	fast := watch(t, h, "org", "a", Filter{})
	var got []string
	for i := range 10 {
		h.Message(envelope(ev{app: "a", id: fmt.Sprint(i), typ: "T", name: "N", session: "s"}))
		ids, _ := drain(t, fast)
		got = append(got, ids...)
		if n := len(slow.Items()); n > 4 {
			t.Fatalf("the slow watcher holds %d items, over its queue of 4", n)
		}
	}
	if len(got) != 10 {
		t.Errorf("the reading watcher got %d of 10 events", len(got))
	}
	select {
	case <-slow.Done():
	default:
		t.Fatal("the watcher that reads nothing is still watching")
	}
	if e := slow.Ending(); e != EndSlow {
		t.Errorf("ending %v, want %v", e, EndSlow)
	}
	if e := fast.Ending(); e != 0 {
		t.Errorf("the reading watcher was ended: %v", e)
	}
	// Its slot is free once it is closed.
	slow.Close()
	if n := h.watchers(); n != 1 {
		t.Errorf("%d watchers after the slow one left, want 1", n)
	}
}

// watchers is the number of watchers the hub counts.
func (h *Hub) watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

func TestBounds(t *testing.T) {
	h, _, _ := newHub(t, Config{MaxWatchers: 4, MaxWatchersPerApp: 2, MaxWatchersPerOrg: 3})
	var held []*Watcher
	try := func(org, app, wantScope string) {
		t.Helper()
		w, err := h.Watch(org, app, Filter{})
		var le *LimitError
		switch {
		case wantScope == "" && err != nil:
			t.Fatalf("watch %s/%s: %v", org, app, err)
		case wantScope == "":
			held = append(held, w)
		case !errors.As(err, &le) || le.Scope != wantScope:
			t.Fatalf("watch %s/%s: %v, want a %s limit", org, app, err, wantScope)
		}
	}
	try("o1", "a", "")
	try("o1", "a", "")
	try("o1", "a", "app")
	try("o1", "b", "")
	try("o1", "c", "org")
	try("o2", "d", "")
	try("o3", "e", "process")
	held[0].Close()
	held[0].Close() // twice is no harm
	try("o3", "e", "")
	try("o1", "a", "process")
	for _, w := range held {
		w.Close()
	}
	if n := h.watchers(); n != 0 {
		t.Errorf("%d watchers counted after all left", n)
	}
}

func TestOneTailStartedByTheFirstStoppedByTheLast(t *testing.T) {
	h, src, _ := newHub(t, Config{})
	waitRunning := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, running := src.counts(); running == want {
				return
			}
			if time.Now().After(deadline) {
				_, running := src.counts()
				t.Fatalf("%d tails running, want %d", running, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if runs, _ := src.counts(); runs != 0 {
		t.Fatalf("a tail ran before anyone watched")
	}
	w1, _ := h.Watch("o", "a", Filter{})
	w2, _ := h.Watch("o", "b", Filter{})
	waitRunning(1)
	w1.Close()
	waitRunning(1)
	w2.Close()
	<-src.ended
	waitRunning(0)
	w3, _ := h.Watch("o", "c", Filter{})
	waitRunning(1)
	if runs, _ := src.counts(); runs != 2 {
		t.Errorf("%d tails started, want 2: one per time someone watched after no one did", runs)
	}
	w3.Close()
}

func TestWatchersToldTheTailsState(t *testing.T) {
	h, _, _ := newHub(t, Config{})
	early := watch(t, h, "o", "a", Filter{})
	if _, states := drain(t, early); len(states) != 0 {
		t.Errorf("states before the tail reads: %v", states)
	}
	h.Reading(kafka.Resumption{First: true})
	late := watch(t, h, "o", "b", Filter{})
	for name, w := range map[string]*Watcher{"early": early, "late": late} {
		if _, states := drain(t, w); len(states) != 1 || states[0].State != StateReading {
			t.Errorf("%s watcher: states %v, want reading once", name, states)
		}
	}
	h.Interrupted(errors.New("broker gone"))
	h.Reading(kafka.Resumption{Lost: true})
	_, states := drain(t, early)
	if len(states) != 2 || states[0].State != StateInterrupted || states[1].State != StateReading || !states[1].Lost {
		t.Errorf("states %+v, want interrupted then reading with records lost", states)
	}
	if !slices.ContainsFunc(states, func(s State) bool { return s.State == StateInterrupted && len(s.Message) > 0 }) {
		t.Errorf("the interruption has no message: %+v", states)
	}
}

func TestCloseEndsEveryWatcher(t *testing.T) {
	h, src, _ := newHub(t, Config{})
	w := watch(t, h, "o", "a", Filter{})
	h.Close()
	select {
	case <-w.Done():
	default:
		t.Fatal("a watcher goes on after the hub closed")
	}
	if e := w.Ending(); e != EndShutdown {
		t.Errorf("ending %v, want shutdown", e)
	}
	if _, err := h.Watch("o", "a", Filter{}); !errors.Is(err, ErrClosed) {
		t.Errorf("watch after close: %v, want ErrClosed", err)
	}
	w.Close()
	select {
	case <-src.ended:
	case <-time.After(10 * time.Second):
		t.Error("the tail runs on after the last watcher left a closed hub")
	}
}
