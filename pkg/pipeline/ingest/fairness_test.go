package ingest_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// attack is one attacking connection: a request whose body is sent as
// far as sent, then paced by trickle (nothing more when nil), while it
// announced length bytes.
type attack struct {
	token, path string
	gz          bool
	sent        []byte
	length      int
	trickle     func(conn net.Conn)
}

// attackResult is what the server answered an attack, and when.
type attackResult struct {
	status  int
	message string
	retry   string
	took    time.Duration
	err     error
}

// launchAttack opens the attack's connection and sends its head and first
// bytes; it returns once they are written, with a channel that gets the
// answer.
func launchAttack(t *testing.T, base string, a attack) <-chan attackResult {
	t.Helper()
	conn, out := dialAttack(t, base, a)
	t.Cleanup(func() { conn.Close() })
	return out
}

// dialAttack is launchAttack, returning the connection for the caller to
// close.
func dialAttack(t *testing.T, base string, a attack) (net.Conn, <-chan attackResult) {
	t.Helper()
	u, err := url.Parse(base)
	must(t, err)
	out := make(chan attackResult, 1)
	start := time.Now()
	conn, err := net.Dial("tcp", u.Host)
	must(t, err)
	// Long enough for the server's own read timeout, so that old code
	// fails by its answer rather than by this deadline.
	must(t, conn.SetDeadline(time.Now().Add(45*time.Second)))
	head := fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n", a.path, a.token, a.length)
	if a.gz {
		head += "Content-Encoding: gzip\r\n"
	}
	_, err = conn.Write(append([]byte(head+"\r\n"), a.sent...))
	must(t, err)
	if a.trickle != nil {
		go a.trickle(conn)
	}
	go func() {
		var r attackResult
		defer func() { out <- r }()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		r.took = time.Since(start)
		if err != nil {
			r.err = err
			return
		}
		defer resp.Body.Close()
		var eb struct{ Message string }
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &eb); err != nil {
			r.err = fmt.Errorf("answer %d %q: %w", resp.StatusCode, raw, err)
		}
		r.status, r.message, r.retry = resp.StatusCode, eb.Message, resp.Header.Get("Retry-After")
	}()
	return conn, out
}

// victimRun is what apps sending their batches as usual saw.
type victimRun struct {
	ok      int
	events  int // in the batches answered 200
	slowest time.Duration
	refused []string // status and message of each refusal
}

// batch is a body a runtime sends and the events it holds.
type batch struct {
	body   string
	events int
}

// knowledgeTurn is a batch of n REQUEST events of a knowledge-base turn,
// each carrying a document of about docBytes.
func knowledgeTurn(n, docBytes int) batch {
	doc := strings.Repeat("Orders ship within two days. ", docBytes/29)
	evs := make([]string, n)
	for i := range evs {
		evs[i] = `{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"victim-kb","payload":{"request":{"knowledgeBaseResult":{"documents":[{"document":"` + doc + `"}]}}}}`
	}
	return batch{body: eventsBody(evs...), events: n}
}

// usualBatches are a knowledge-base turn of about 600 KB and a small one.
func usualBatches() []batch {
	return []batch{knowledgeTurn(1, 600<<10), {body: eventsBody(launch("victim")), events: 1}}
}

// sendAsUsual sends the batches, in turn, of the victims' apps, also in
// turn, for window, and at least six. Each must answer 200 within bound.
func sendAsUsual(t *testing.T, h *harness, victims []string, batches []batch, window, bound time.Duration) victimRun {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}, Timeout: 40 * time.Second}
	defer c.CloseIdleConnections()
	var run victimRun
	start := time.Now()
	for i := 0; i < 6 || time.Since(start) < window; i++ {
		b := batches[i%len(batches)]
		req, err := http.NewRequest(http.MethodPut, h.url+"/cms/app/events", strings.NewReader(b.body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+h.tokens[victims[i%len(victims)]])
		sent := time.Now()
		resp, err := c.Do(req)
		must(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(sent)
		run.slowest = max(run.slowest, took)
		if resp.StatusCode != 200 || took > bound {
			run.refused = append(run.refused, fmt.Sprintf("%s: %d after %s: %s", victims[i%len(victims)], resp.StatusCode, took.Round(time.Millisecond), raw))
			continue
		}
		run.ok++
		run.events += b.events
	}
	return run
}

// TestOneAppCannotStarveAnother attacks ingest from one app, with its own
// token and its organization's acting for it, as a page's public runtime
// token lets anyone do, while two other apps (one of the same
// organization) send their batches as usual. Stalled gzip bombs sized to
// fill the server's body memory between them, and slow uploads enough to
// take every request slot, leave the other apps' batches answered 200
// within a second or two: the attacker gets only its app's shares, its
// further requests are refused 429 saying which share, and what it holds
// is cut off at the minimum upload rate with 408 rather than at the read
// timeout, after which its app sends again. Nothing refused is stored.
func TestOneAppCannotStarveAnother(t *testing.T) {
	const (
		// A victim's batch answers within tens of milliseconds, or a
		// second or two on this small shared machine under the race
		// detector while the bombs are decompressed; a refusal would
		// last the attack.
		bound = 5 * time.Second
		// The held bodies must be cut off long before the 30 s read
		// timeout: the default grace of 2 s and the few bytes sent.
		cutBy = 8 * time.Second
	)
	b := startBroker(t, "")
	victims := []string{"a2", "b1"}

	t.Run("stalled gzip bombs", func(t *testing.T) {
		h := newHarness(t, b, harnessOpts{})
		// Six bombs that between them would hold all but 1 MiB of the
		// body memory: each decompresses below the decompressed limit,
		// then stalls with most of its announced length unsent.
		const bombs = 6
		size := (ingest.DefaultMaxBodyMemory-1<<20)/bombs/ingest.MemoryPerBodyByte + ingest.BodyAllowance
		var z bytes.Buffer
		zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
		must(t, err)
		_, err = zw.Write(make([]byte, size))
		must(t, err)
		must(t, zw.Close())
		bomb := z.Bytes()[:z.Len()-8] // without its trailer, so that it waits for more
		var answers []<-chan attackResult
		for i := range bombs {
			token, path := h.tokens["a1"], "/cms/app/events"
			if i%2 == 1 {
				token, path = h.tokens["orgA"], "/cms/app/events?appId=app-a1"
			}
			answers = append(answers, launchAttack(t, h.url, attack{token: token, path: path, gz: true, sent: bomb, length: len(bomb) + 1<<20}))
		}
		run := sendAsUsual(t, h, victims, usualBatches(), 3*time.Second, bound)
		checkAttack(t, h, "bombs", answers, cutBy)
		t.Logf("victims: %d batches answered 200, the slowest in %s", run.ok, run.slowest.Round(time.Millisecond))
		if len(run.refused) > 0 || run.ok == 0 {
			t.Errorf("beside app-a1's stalled bombs, %d batches of other apps answered 200 and %d did not within %s:\n%s",
				run.ok, len(run.refused), bound, strings.Join(run.refused, "\n"))
		}
		checkStored(t, h, run.events+1)
	})

	t.Run("slow uploads", func(t *testing.T) {
		// Few slots: the attacker's two tokens could take them all, each
		// its share of half.
		const slots = 16
		h := newHarness(t, b, harnessOpts{maxInFlight: slots})
		trickle := func(conn net.Conn) {
			for range 600 {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // 20 bytes a second
			}
		}
		var answers []<-chan attackResult
		for i := range slots {
			token, path := h.tokens["a1"], "/cms/app/events"
			if i%2 == 1 {
				token, path = h.tokens["orgA"], "/cms/app/events?appId=app-a1"
			}
			answers = append(answers, launchAttack(t, h.url, attack{token: token, path: path, sent: []byte(`{"events":[`), length: 100_000, trickle: trickle}))
		}
		run := sendAsUsual(t, h, victims, usualBatches(), 2500*time.Millisecond, bound)
		checkAttack(t, h, "slow uploads", answers, cutBy)
		t.Logf("victims: %d batches answered 200, the slowest in %s", run.ok, run.slowest.Round(time.Millisecond))
		if len(run.refused) > 0 || run.ok == 0 {
			t.Errorf("beside app-a1's slow uploads, %d batches of other apps answered 200 and %d did not within %s:\n%s",
				run.ok, len(run.refused), bound, strings.Join(run.refused, "\n"))
		}
		checkStored(t, h, run.events+1)
	})
}

// checkAttack waits for every attacking request's answer: a 429 naming
// one of its app's shares (once the request met it: at once for the slots,
// once decompressed to the share for memory), or a 408 for the upload
// rate, each within cutBy, and never a 503 (the server full). Then the
// attacker's app sends a batch, which answers 200: its shares came back.
func checkAttack(t *testing.T, h *harness, what string, answers []<-chan attackResult, cutBy time.Duration) {
	t.Helper()
	seen := map[string]int{}
	for _, ch := range answers {
		r := <-ch
		switch {
		case r.err != nil:
			t.Errorf("%s: %v", what, r.err)
		case r.status == 429 && r.retry == "1" && r.took < cutBy &&
			(strings.HasPrefix(r.message, `app "app-a1" already has `) && strings.HasSuffix(r.message, ` requests in flight, its share of the request slots; retry later`) ||
				strings.HasPrefix(r.message, `the bodies of app "app-a1" in flight hold its share of the memory for request bodies (`)):
			seen["429 "+r.message]++
		case r.status == 408 && r.took < cutBy && strings.HasPrefix(r.message, "the body arrived too slowly: "):
			seen["408 upload rate"]++
		default:
			t.Errorf("%s: %d after %s, Retry-After %q: %s; want a 429 for a share of app-a1 or a 408 for the upload rate within %s",
				what, r.status, r.took.Round(time.Millisecond), r.retry, r.message, cutBy)
		}
	}
	t.Logf("%s answered %v", what, seen)
	r := h.put("/cms/app/events", eventsBody(launch("after")), h.bearer("a1")...)
	if r.status != 200 {
		t.Errorf("app-a1 after its %s ended: %d %s", what, r.status, r.raw)
	}
}

// checkStored checks that the events topic holds want records: the
// batches answered 200, nothing of what was refused.
func checkStored(t *testing.T, h *harness, want int) {
	t.Helper()
	if got := len(readTopic(t, h.broker.Addr(), h.topic)); got != want {
		t.Errorf("events topic holds %d records, want %d", got, want)
	}
	if got := len(readTopic(t, h.broker.Addr(), h.quarantine)); got != 0 {
		t.Errorf("quarantine topic holds %d records, want none", got)
	}
}

// stalledBomb is a gzip body that decompresses to size zero bytes and ends
// with a sync flush rather than the end of its stream, so that the server
// waits for more.
func stalledBomb(t *testing.T, size int) []byte {
	t.Helper()
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	must(t, err)
	_, err = zw.Write(make([]byte, size))
	must(t, err)
	must(t, zw.Flush())
	return z.Bytes()
}

// bombSlots are an attacker's connections, each keeping a stalled bomb
// open and opening another as soon as the server refuses one.
type bombSlots struct {
	open    atomic.Int32      // bombs sent and not answered
	changed chan struct{}     // a bomb was answered
	refused chan attackResult // what the server answered
	cease   chan struct{}     // closed: open no more bombs
	stop    chan struct{}     // closed: let go of the bombs still open
	ceased  sync.Once
	stopped sync.Once
	wg      sync.WaitGroup
}

// newBombSlots returns slots whose bombs are let go when t ends, however
// it ends, so that none dials a server gone.
func newBombSlots(t *testing.T) *bombSlots {
	s := &bombSlots{changed: make(chan struct{}, 1), refused: make(chan attackResult, 1000),
		cease: make(chan struct{}), stop: make(chan struct{})}
	t.Cleanup(func() {
		s.ceased.Do(func() { close(s.cease) })
		s.stopped.Do(func() { close(s.stop) })
		s.wg.Wait()
	})
	return s
}

// keep keeps one bomb open as token to path, at the attacker's pace.
func (s *bombSlots) keep(t *testing.T, base, token, path string, bomb []byte) {
	s.wg.Go(func() {
		for {
			s.open.Add(1)
			conn, answer := dialAttack(t, base, attack{token: token, path: path, gz: true, sent: bomb, length: len(bomb) + 1<<20})
			select {
			case r := <-answer:
				conn.Close()
				s.refused <- r
				s.open.Add(-1)
				select {
				case s.changed <- struct{}{}:
				default:
				}
			case <-s.stop:
				conn.Close()
				return
			}
			// The attacker's pace: time for the bombs still held to be
			// decompressed before another competes with them.
			select {
			case <-s.cease:
				return
			case <-time.After(time.Second):
			}
		}
	})
}

// settle stops opening bombs and waits until at most held are open or
// the deadline passes; it returns how many are open, which it then lets go,
// and what the server answered the others.
func (s *bombSlots) settle(held int, deadline time.Duration) (open int, refused []attackResult) {
	s.ceased.Do(func() { close(s.cease) })
	timeout := time.After(deadline)
wait:
	for int(s.open.Load()) > held {
		select {
		case <-s.changed:
		case <-timeout:
			break wait
		}
	}
	open = int(s.open.Load())
	s.stopped.Do(func() { close(s.stop) })
	s.wg.Wait()
	close(s.refused)
	for r := range s.refused {
		refused = append(refused, r)
	}
	return open, refused
}

// TestOneOrganizationCannotStarveAnother attacks ingest with what one
// organization's public tokens can do while an app of another
// organization sends its batches, among them ones of about 2 MB (a
// knowledge-base turn a runtime grew while refused), which must keep
// answering 200 within a bound. Each attacker keeps two stalled gzip bombs
// open on each app it sends for, each taking nearly half an app's share
// of body memory, and opens another as soon as one is refused; the
// batches start once the attacker holds all it can. Every app stays
// within its share, so only the token's share (an organization token for
// four apps) or the organization's (its app and organization tokens for
// four apps) keeps them from holding all of the body memory: the attacker
// holds at most that share, its other bombs get 429 naming it, and once
// it lets go its next batch passes. Nothing refused is stored.
func TestOneOrganizationCannotStarveAnother(t *testing.T) {
	// As in TestOneAppCannotStarveAnother: tens of milliseconds, or a
	// second or two on this small shared machine under the race detector.
	const bound = 5 * time.Second
	b := startBroker(t, "")
	// Two bombs take all but about 1 MiB of an app's default share, with
	// the decompressor's state and the chunk counted ahead of reading: 8
	// of them leave less of the body memory than a 2 MB batch needs.
	perBomb := ingest.DefaultMaxBodyMemory/8 - 512<<10
	bomb := stalledBomb(t, perBomb/ingest.MemoryPerBodyByte+ingest.BodyAllowance)
	const tokenShare = `the bodies of this token in flight hold its share of the memory for request bodies (`
	const orgShare = `the bodies of organization "org-a" in flight hold its share of the memory for request bodies (`
	cases := []struct {
		name string
		// attackers are token names and the app each keeps two bombs on.
		attackers [][2]string
		// held is the most bombs the share that binds holds.
		held int
		// share is what the refusals name, and others what they may
		// name instead: an app whose two bombs hold all of the token's
		// share, or all of the app's own (a bomb sent again for an app
		// while its two are still held).
		share  string
		others []string
	}{
		{name: "one organization token for four apps", held: 2, share: tokenShare, others: []string{`the bodies of app "app-a`},
			attackers: [][2]string{{"orgA", "app-a1"}, {"orgA", "app-a2"}, {"orgA", "app-a3"}, {"orgA", "app-a4"}}},
		{name: "app and organization tokens of one organization for four apps", held: 4, share: orgShare, others: []string{`the bodies of app "app-a`},
			attackers: [][2]string{{"a1", "app-a1"}, {"a2", "app-a2"}, {"orgA", "app-a3"}, {"orgA2", "app-a4"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The minimum upload rate counts body bytes as the server reads
			// them, and under the race detector on this small machine
			// decompressing 85 MiB of bombs takes longer than the default
			// grace of 2 s; a fast server would be done well within it. So
			// the grace is the read timeout's 30 s here. The rate does not
			// bound what a bomb holds anyway: sent on with empty deflate
			// blocks, a bomb keeps pace and decompresses to nothing more.
			h := newHarness(t, b, harnessOpts{minUploadGrace: ingest.DefaultReadTimeout})
			ctx := context.Background()
			for _, app := range []string{"app-a3", "app-a4"} {
				must(t, h.store.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: app, OrganizationID: "org-a", Name: app, CreatedAt: time.Now(), UpdatedAt: time.Now()}))
			}
			h.addToken("orgA2", "org-a", "")
			path := func(token, app string) string {
				if strings.HasPrefix(token, "org") {
					return "/cms/app/events?appId=" + app
				}
				return "/cms/app/events"
			}

			slots := newBombSlots(t)
			for _, a := range tc.attackers {
				for range 2 {
					slots.keep(t, h.url, h.tokens[a[0]], path(a[0], a[1]), bomb)
				}
			}
			// The attacker knows it holds all it can once a probe for each
			// app, a body of 1 MB that is not JSON, is refused 429 rather
			// than read (and answered 400, storing nothing).
			probe := `{"events":[` + strings.Repeat(" ", 1<<20)
			for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
				full := 0
				for _, a := range tc.attackers {
					if r := h.put(path(a[0], a[1]), probe, h.bearer(a[0])...); r.status == 429 {
						full++
					}
				}
				if full == len(tc.attackers) {
					break
				}
				// Eight bombs of 31 MiB decompress slowly under the race
				// detector beside other packages' tests.
				if time.Since(start) > 45*time.Second {
					t.Fatalf("after 45s, %d of the attacker's %d probes were refused 429", full, len(tc.attackers))
				}
			}
			run := sendAsUsual(t, h, []string{"b1"}, []batch{knowledgeTurn(4, 500<<10), {body: eventsBody(launch("victim")), events: 1}}, 5*time.Second, bound)
			// Well within the read timeout of the first bombs.
			held, refusals := slots.settle(tc.held, 10*time.Second)

			t.Logf("victims: %d batches answered 200, the slowest in %s", run.ok, run.slowest.Round(time.Millisecond))
			if len(run.refused) > 0 || run.ok == 0 {
				t.Errorf("beside org-a's stalled bombs, %d batches of app-b1 answered 200 and %d did not within %s:\n%s",
					run.ok, len(run.refused), bound, strings.Join(run.refused, "\n"))
			}
			named := 0
			for _, r := range refusals {
				switch {
				case r.status == 429 && r.retry == "1" && strings.HasPrefix(r.message, tc.share):
					named++
				case r.status == 429 && r.retry == "1" && slices.ContainsFunc(tc.others, func(p string) bool { return strings.HasPrefix(r.message, p) }):
				default:
					t.Errorf("bomb answered %d after %s, Retry-After %q: %s (%v); want a 429 naming %q",
						r.status, r.took.Round(time.Millisecond), r.retry, r.message, r.err, tc.share)
				}
			}
			t.Logf("bombs: %d held at the end, %d refused naming the share, %d another", held, named, len(refusals)-named)
			if held > tc.held || named == 0 {
				t.Errorf("%d bombs held at the end and %d refused naming %q; want at most %d held and refusals naming it",
					held, named, tc.share, tc.held)
			}

			// Its share comes back once its bodies are gone.
			after := knowledgeTurn(4, 500<<10)
			a := tc.attackers[0]
			for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
				r := h.put(path(a[0], a[1]), after.body, h.bearer(a[0])...)
				if r.status == 200 {
					break
				}
				if r.status != 429 || time.Since(start) > 10*time.Second {
					t.Fatalf("%s's batch after the attack: %d %s", a[0], r.status, r.raw)
				}
			}
			checkStored(t, h, run.events+after.events)
		})
	}
}
