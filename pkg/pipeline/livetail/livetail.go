// Package livetail shows an app's events live, as ingest durably
// published them: it reads the events and quarantine topics from their
// newest records (no consumer group, so whichever ingest replica took a
// batch, every api process sees the same records) and hands each app's
// events to the people watching that app.
//
// One tail per process serves every watcher: a Hub starts it when the
// first watcher of any app arrives and stops it when the last one leaves,
// and fans its records out by app. Each watcher costs a bounded amount:
// at most a number of events a second (the rest are counted and reported
// in summaries), a queue of a fixed length (a watcher whose queue is full
// is dropped rather than slowing the tail or anyone else), and the
// watchers of one app, of one organization and of the process are
// bounded. Records of apps nobody watches are only counted; an event is
// decoded once however many watch it, and only when a watcher has room
// for it or a filter needs its fields.
//
// The HTTP stream (Server-Sent Events) and the page are livehttp's.
package livetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// Config bounds what watchers may cost. Zero fields take the defaults.
type Config struct {
	// EventsTopic and QuarantineTopic are the topics ingest publishes to.
	EventsTopic, QuarantineTopic string
	// MaxWatchers bounds the watchers of the process.
	MaxWatchers int
	// MaxWatchersPerApp bounds the watchers of one app.
	MaxWatchersPerApp int
	// MaxWatchersPerOrg bounds the watchers of the apps of one
	// organization, so that one organization's many apps cannot take
	// every watcher of the process; zero means half of MaxWatchers.
	MaxWatchersPerOrg int
	// EventsPerSecond is the most events one watcher is sent a second
	// (a burst of as many at once); the others are counted as skipped.
	EventsPerSecond float64
	// PayloadBytes bounds the JSON text of a payload shown; a longer one
	// is cut (Event.PayloadCut).
	PayloadBytes int
	// QueueLength is the number of messages a watcher may have waiting to
	// be written; a watcher whose queue is full is dropped as too slow.
	// Zero means a second of events (EventsPerSecond), at least
	// MinQueueLength and at most MaxQueueLength.
	QueueLength int
}

// Defaults of Config.
const (
	DefaultMaxWatchers       = 100
	DefaultMaxWatchersPerApp = 10
	DefaultEventsPerSecond   = 50
	DefaultPayloadBytes      = 4096
	// DefaultReadPerSecond is how many records the tail reads a second
	// (kafka.TailConfig.MaxRecordsPerSecond): twenty times what ten
	// watchers of one app are shown, so that filters still find rare
	// events, and a small part of what ingest can publish, so that
	// watching costs little however busy ingest is.
	DefaultReadPerSecond = 10_000
	MinQueueLength       = 64
	MaxQueueLength       = 1024
)

func (c Config) withDefaults() Config {
	if c.MaxWatchers <= 0 {
		c.MaxWatchers = DefaultMaxWatchers
	}
	if c.MaxWatchersPerApp <= 0 {
		c.MaxWatchersPerApp = DefaultMaxWatchersPerApp
	}
	if c.MaxWatchersPerOrg <= 0 {
		c.MaxWatchersPerOrg = max(1, c.MaxWatchers/2)
	}
	if c.EventsPerSecond <= 0 {
		c.EventsPerSecond = DefaultEventsPerSecond
	}
	if c.PayloadBytes <= 0 {
		c.PayloadBytes = DefaultPayloadBytes
	}
	if c.QueueLength <= 0 {
		c.QueueLength = min(max(int(c.EventsPerSecond), MinQueueLength), MaxQueueLength)
	}
	return c
}

// Source is what a Hub reads: a kafka.Tail of the events and quarantine
// topics.
type Source interface {
	Run(ctx context.Context, h kafka.TailHandler)
}

// Kind is the kind of an Item.
type Kind string

// Kinds of Item.
const (
	// KindEvent: Data is an Event.
	KindEvent Kind = "event"
	// KindState: Data is a State: the tail reads, or is interrupted.
	KindState Kind = "state"
)

// Item is a message for a watcher: an event, or the state of the tail.
// Data is JSON, shared by every watcher it is sent to: never change it.
type Item struct {
	Kind Kind
	Data []byte
}

// State is the state of the tail, as watchers are told it.
type State struct {
	// State is "reading" or "interrupted".
	State   string `json:"state"`
	Message string `json:"message"`
	// Lost, when reading again, says that records published while the
	// tail was interrupted are not shown.
	Lost bool `json:"lost,omitempty"`
}

// States of State.
const (
	StateReading     = "reading"
	StateInterrupted = "interrupted"
)

// Ending says why the hub ended a watcher.
type Ending int

// Endings.
const (
	// EndSlow: the watcher's queue was full; it did not read fast enough.
	EndSlow Ending = iota + 1
	// EndShutdown: the process is shutting down.
	EndShutdown
)

func (e Ending) String() string {
	switch e {
	case EndSlow:
		return "slow"
	case EndShutdown:
		return "shutdown"
	}
	return "Ending(" + fmt.Sprint(int(e)) + ")"
}

// LimitError refuses a watcher over one of the bounds.
type LimitError struct {
	// Scope is "app", "org" or "process".
	Scope string
	Limit int
	// ID is the app or organization.
	ID string
}

func (e *LimitError) Error() string {
	switch e.Scope {
	case "app":
		return fmt.Sprintf("app %q already has %d live watchers, the most one app may have (LIVE_MAX_WATCHERS_PER_APP)", e.ID, e.Limit)
	case "org":
		return fmt.Sprintf("the apps of organization %q already have %d live watchers, the most one organization may have (LIVE_MAX_WATCHERS_PER_ORG)", e.ID, e.Limit)
	}
	return fmt.Sprintf("this server already has %d live watchers, the most it serves (LIVE_MAX_WATCHERS)", e.Limit)
}

// ErrClosed refuses a watcher once the hub has closed.
var ErrClosed = errors.New("the server is shutting down")

// Hub is the process's one tail and its watchers, by app.
type Hub struct {
	cfg     Config
	src     Source
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time

	mu     sync.Mutex
	groups map[string]*group
	total  int
	perOrg map[string]int
	closed bool
	// tailStop ends the running tail; tailDone is closed once it has.
	tailStop context.CancelFunc
	tailDone chan struct{}

	// view is groups as the tail's goroutines read it: replaced, never
	// changed, so that a record costs no lock of the hub.
	view atomic.Pointer[map[string]*group]
	// state is the tail's latest State item, nil before it reads.
	state atomic.Pointer[Item]
	// unread counts the records the tail passed over (see Unread).
	unread atomic.Uint64
	// readers holds *reader, one for each record being offered.
	readers sync.Pool
}

// NewHub returns a hub reading src, registering its metrics with reg.
func NewHub(cfg Config, src Source, reg prometheus.Registerer, log *slog.Logger) *Hub {
	h := &Hub{cfg: cfg.withDefaults(), src: src, log: log, metrics: newMetrics(reg), now: time.Now,
		groups: map[string]*group{}, perOrg: map[string]int{}}
	h.view.Store(&map[string]*group{})
	h.readers.New = func() any { return new(reader) }
	return h
}

// Config is the hub's configuration, defaults filled in.
func (h *Hub) Config() Config { return h.cfg }

// Filter chooses the events a watcher is shown; empty fields match any.
type Filter struct {
	Type, Name, SessionID, UserID string
	// Quarantined shows only quarantined events.
	Quarantined bool
}

// needsFields reports whether the filter reads the events' fields.
func (f Filter) needsFields() bool {
	return f.Type != "" || f.Name != "" || f.SessionID != "" || f.UserID != ""
}

func (f Filter) match(fl *fields) bool {
	return (f.Type == "" || equals(fl.typ, f.Type)) && (f.Name == "" || equals(fl.name, f.Name)) &&
		(f.SessionID == "" || equals(fl.sessionID, f.SessionID)) && (f.UserID == "" || equals(fl.userID, f.UserID))
}

// Watch adds a watcher of the app appID of organization orgID, shown the
// events that pass f. The caller has checked that it may; it must Close
// the watcher when done.
func (h *Hub) Watch(orgID, appID string, f Filter) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[appID]
	var over *LimitError
	switch {
	case h.closed:
		return nil, ErrClosed
	case g != nil && g.size() >= h.cfg.MaxWatchersPerApp:
		over = &LimitError{Scope: "app", Limit: h.cfg.MaxWatchersPerApp, ID: appID}
	case h.perOrg[orgID] >= h.cfg.MaxWatchersPerOrg:
		over = &LimitError{Scope: "org", Limit: h.cfg.MaxWatchersPerOrg, ID: orgID}
	case h.total >= h.cfg.MaxWatchers:
		over = &LimitError{Scope: "process", Limit: h.cfg.MaxWatchers}
	}
	if over != nil {
		h.metrics.refused.WithLabelValues(over.Scope).Inc()
		return nil, over
	}
	if h.total == 0 {
		h.startTail()
	}
	if g == nil {
		g = &group{appID: appID}
		h.groups[appID] = g
		h.publish()
	}
	w := &Watcher{hub: h, g: g, orgID: orgID, filter: f, items: make(chan Item, h.cfg.QueueLength),
		done: make(chan struct{}), tokens: h.cfg.EventsPerSecond, last: h.now(), unreadMark: h.unread.Load()}
	g.mu.Lock()
	g.watchers = append(g.watchers, w)
	g.mu.Unlock()
	h.total++
	h.perOrg[orgID]++
	h.metrics.watchers.Set(float64(h.total))
	if st := h.state.Load(); st != nil {
		g.mu.Lock()
		w.setState(st)
		g.mu.Unlock()
	}
	return w, nil
}

// publish replaces the view of the groups; h.mu is held.
func (h *Hub) publish() {
	v := make(map[string]*group, len(h.groups))
	for k, g := range h.groups {
		v[k] = g
	}
	h.view.Store(&v)
}

// startTail starts the tail; h.mu is held. A tail still stopping is
// waited for, so that two never run at once.
func (h *Hub) startTail() {
	if h.tailDone != nil {
		<-h.tailDone
	}
	h.state.Store(nil)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.tailStop, h.tailDone = stop, done
	h.metrics.tailRunning.Set(1)
	h.log.Info("live view: tail started")
	go func() {
		defer close(done)
		h.src.Run(ctx, h)
	}()
}

// stopTail stops the tail without waiting for it; h.mu is held.
func (h *Hub) stopTail() {
	if h.tailStop != nil {
		h.tailStop()
		h.tailStop = nil
		h.state.Store(nil)
		h.metrics.tailRunning.Set(0)
		h.log.Info("live view: tail stopped, no one watches")
	}
}

// leave removes w; it is the watcher's Close.
func (h *Hub) leave(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := w.g
	g.mu.Lock()
	w.end(0)
	w.takeCounts()
	left := !w.left
	w.left = true
	g.watchers = slices.DeleteFunc(g.watchers, func(x *Watcher) bool { return x == w })
	empty := len(g.watchers) == 0
	g.mu.Unlock()
	if !left {
		return
	}
	h.total--
	if h.perOrg[w.orgID]--; h.perOrg[w.orgID] == 0 {
		delete(h.perOrg, w.orgID)
	}
	h.metrics.watchers.Set(float64(h.total))
	if empty && h.groups[g.appID] == g {
		delete(h.groups, g.appID)
		h.publish()
	}
	if h.total == 0 {
		h.stopTail()
	}
}

// Run waits for ctx to end, then closes the hub: every watcher is ended
// (EndShutdown), so that streams close before the server's drain ends,
// and no new one is admitted.
func (h *Hub) Run(ctx context.Context) {
	<-ctx.Done()
	h.Close()
}

// Close ends every watcher with EndShutdown, refuses new ones and stops
// the tail once they have left.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, g := range h.groups {
		g.mu.Lock()
		for _, w := range g.watchers {
			w.end(EndShutdown)
		}
		g.mu.Unlock()
	}
	if h.total == 0 {
		h.stopTail()
	}
}

// Messages implements kafka.TailHandler: each record goes to the
// watchers of its app.
func (h *Hub) Messages(ms []kafka.Message) {
	h.metrics.read.Add(float64(len(ms)))
	view := *h.view.Load()
	for _, m := range ms {
		h.message(view, m)
	}
}

// Message hands one record to the watchers of its app.
func (h *Hub) Message(m kafka.Message) {
	h.metrics.read.Inc()
	h.message(*h.view.Load(), m)
}

func (h *Hub) message(view map[string]*group, m kafka.Message) {
	quarantined := m.Topic == h.cfg.QuarantineTopic
	if !quarantined && m.Topic != h.cfg.EventsTopic {
		return
	}
	g := view[string(appOfKey(m.Key, quarantined))]
	if g == nil {
		return
	}
	g.offer(h, m, quarantined)
}

// Unread implements kafka.TailHandler: records the tail passed over to
// keep within its reading allowance are counted for every watcher's
// summary, whatever app they were of.
func (h *Hub) Unread(n int64) {
	h.unread.Add(uint64(n))
	h.metrics.unread.Add(float64(n))
}

// Interrupted implements kafka.TailHandler.
func (h *Hub) Interrupted(err error) {
	h.log.Warn("live view: reading Kafka interrupted; trying again", "err", err)
	h.metrics.interruptions.Inc()
	h.broadcast(State{State: StateInterrupted, Message: "Reading Kafka stopped (" + err.Error() + "); trying again. " +
		"Events published meanwhile are shown once reading goes on."})
}

// Reading implements kafka.TailHandler.
func (h *Hub) Reading(r kafka.Resumption) {
	st := State{State: StateReading, Lost: r.Lost}
	switch {
	case r.First:
		st.Message = "Reading the events and quarantine topics from their newest records: events published from now on show here."
	case r.Lost:
		st.Message = "Reading Kafka again, from the newest records: Kafka no longer holds some records published while reading stopped, and those are not shown."
	default:
		st.Message = "Reading Kafka again from where it stopped: no event published meanwhile is missed."
	}
	if !r.First {
		h.log.Info("live view: reading Kafka again", "lost", r.Lost)
	}
	h.broadcast(st)
}

// broadcast tells every watcher the tail's new state, and keeps it for
// watchers that arrive later.
func (h *Hub) broadcast(st State) {
	data, _ := json.Marshal(st)
	it := &Item{Kind: KindState, Data: data}
	h.state.Store(it)
	for _, g := range *h.view.Load() {
		g.mu.Lock()
		for _, w := range g.watchers {
			w.setState(it)
		}
		g.mu.Unlock()
	}
}

// group is the watchers of one app.
type group struct {
	appID    string
	mu       sync.Mutex
	watchers []*Watcher
}

func (g *group) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.watchers)
}

// offer hands a record of the group's app to its watchers. The record is
// decoded at most once, and only when a watcher's filter needs its
// fields or a watcher has room for it.
func (g *group) offer(h *Hub, m kafka.Message, quarantined bool) {
	now := h.now()
	rd := h.readers.Get().(*reader)
	defer h.readers.Put(rd)
	var (
		rec               record
		fl                fields
		scanned, readable bool
		item              *Item
		decoded           bool
	)
	// read opens the record and reads its fields, once; false when it
	// cannot be read or is another app's.
	read := func() bool {
		if !scanned {
			scanned = true
			var ok bool
			if rec, ok = rd.open(m.Value); ok {
				fl, ok = scanFields(rec)
			}
			if readable = ok && equals(fl.appID, g.appID); !readable {
				h.metrics.unreadable.Inc()
			}
		}
		return readable
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.watchers {
		if w.closed || (w.filter.Quarantined && !quarantined) {
			continue
		}
		if w.filter.needsFields() {
			if !read() {
				return
			}
			if !w.filter.match(&fl) {
				continue
			}
		}
		w.seen++
		if !w.take(now, h.cfg.EventsPerSecond) {
			w.skipped++
			continue
		}
		if !decoded {
			if read() {
				item = h.encode(rec, m, quarantined)
			}
			decoded = true
		}
		if item == nil {
			w.skipped++
			continue
		}
		select {
		case w.items <- *item:
			w.shown++
		default:
			w.end(EndSlow)
		}
	}
}

// encode is the item of a record read already, nil when it cannot be
// decoded.
func (h *Hub) encode(rec record, m kafka.Message, quarantined bool) *Item {
	ev, ok := decode(rec, quarantined, m.Partition, m.Offset, h.cfg.PayloadBytes)
	if !ok {
		h.metrics.unreadable.Inc()
		return nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		h.metrics.unreadable.Inc()
		return nil
	}
	return &Item{Kind: KindEvent, Data: data}
}

// Watcher is one person watching an app's events.
type Watcher struct {
	hub    *Hub
	g      *group
	orgID  string
	filter Filter
	items  chan Item
	done   chan struct{}

	// Guarded by g.mu:
	ended                Ending
	closed               bool // done is closed
	left                 bool // counted out of the hub
	tokens               float64
	last                 time.Time
	state                *Item // the last state item queued
	seen, shown, skipped uint64
	unreadMark           uint64 // the hub's unread count at the last counts
}

// Items are the watcher's messages, in order.
func (w *Watcher) Items() <-chan Item { return w.items }

// Done is closed when the hub ends the watcher (see Ending), or when it
// is closed.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Ending is why the hub ended the watcher; zero before it did, or when
// the watcher was closed by its owner.
func (w *Watcher) Ending() Ending {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	return w.ended
}

// Counts are what a watcher was and was not shown over a period: Seen
// events of its app passed its filters, Shown of them were queued for it,
// Skipped were over its events a second. Unread records, of any app, were
// passed over unread: more were published than the view reads a second,
// so what it saw is a sample.
type Counts struct {
	Seen    uint64 `json:"seen"`
	Shown   uint64 `json:"shown"`
	Skipped uint64 `json:"skipped"`
	Unread  uint64 `json:"unread"`
}

// TakeCounts returns the counts since the last call and starts new ones.
func (w *Watcher) TakeCounts() Counts {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	return w.takeCounts()
}

// takeCounts returns and resets the counts, adding them to the metrics
// (counted here rather than per record, which every partition's reader
// would contend for); g.mu is held.
func (w *Watcher) takeCounts() Counts {
	unread := w.hub.unread.Load()
	c := Counts{Seen: w.seen, Shown: w.shown, Skipped: w.skipped, Unread: unread - w.unreadMark}
	w.seen, w.shown, w.skipped, w.unreadMark = 0, 0, 0, unread
	w.hub.metrics.sent.Add(float64(c.Shown))
	w.hub.metrics.skipped.Add(float64(c.Skipped))
	return c
}

// Close removes the watcher from its hub.
func (w *Watcher) Close() { w.hub.leave(w) }

// take spends one event of the watcher's allowance at now; g.mu is held.
func (w *Watcher) take(now time.Time, rate float64) bool {
	w.tokens = min(rate, w.tokens+now.Sub(w.last).Seconds()*rate)
	w.last = now
	if w.tokens < 1 {
		return false
	}
	w.tokens--
	return true
}

// setState queues the tail's state it unless it was the last queued;
// g.mu is held.
func (w *Watcher) setState(it *Item) {
	if w.ended != 0 || w.closed || w.state == it {
		return
	}
	select {
	case w.items <- *it:
		w.state = it
	default:
		w.end(EndSlow)
	}
}

// end ends the watcher for why (0: closed by its owner); g.mu is held.
func (w *Watcher) end(why Ending) {
	if w.closed {
		return
	}
	w.closed = true
	w.ended = why
	close(w.done)
}
