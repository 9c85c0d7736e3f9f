package ingest_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/ingest"
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
	u, err := url.Parse(base)
	must(t, err)
	out := make(chan attackResult, 1)
	start := time.Now()
	conn, err := net.Dial("tcp", u.Host)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
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
	return out
}

// victimRun is what apps sending their batches as usual saw.
type victimRun struct {
	ok      int
	slowest time.Duration
	refused []string // status and message of each refusal
}

// sendAsUsual sends batches of the victims' apps in turn for window, and
// at least six: a knowledge-base turn of about 600 KB and a small one.
// Each must answer 200 within bound.
func sendAsUsual(t *testing.T, h *harness, victims []string, window, bound time.Duration) victimRun {
	t.Helper()
	doc := strings.Repeat("Orders ship within two days. ", 600<<10/29)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 40 * time.Second}
	defer c.CloseIdleConnections()
	var run victimRun
	start := time.Now()
	for i := 0; i < 6 || time.Since(start) < window; i++ {
		body := eventsBody(launch(fmt.Sprintf("victim-%d", i)))
		if i%2 == 0 {
			body = eventsBody(`{"type":"REQUEST","name":"INTENT_REQUEST","sessionId":"victim-kb","payload":{"request":{"knowledgeBaseResult":{"documents":[{"document":"` + doc + `"}]}}}}`)
		}
		req, err := http.NewRequest(http.MethodPut, h.url+"/cms/app/events", strings.NewReader(body))
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
		run := sendAsUsual(t, h, victims, 3*time.Second, bound)
		checkAttack(t, h, "bombs", answers, cutBy)
		t.Logf("victims: %d batches answered 200, the slowest in %s", run.ok, run.slowest.Round(time.Millisecond))
		if len(run.refused) > 0 || run.ok == 0 {
			t.Errorf("beside app-a1's stalled bombs, %d batches of other apps answered 200 and %d did not within %s:\n%s",
				run.ok, len(run.refused), bound, strings.Join(run.refused, "\n"))
		}
		checkStored(t, h, run.ok+1)
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
		run := sendAsUsual(t, h, victims, 2500*time.Millisecond, bound)
		checkAttack(t, h, "slow uploads", answers, cutBy)
		t.Logf("victims: %d batches answered 200, the slowest in %s", run.ok, run.slowest.Round(time.Millisecond))
		if len(run.refused) > 0 || run.ok == 0 {
			t.Errorf("beside app-a1's slow uploads, %d batches of other apps answered 200 and %d did not within %s:\n%s",
				run.ok, len(run.refused), bound, strings.Join(run.refused, "\n"))
		}
		checkStored(t, h, run.ok+1)
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
