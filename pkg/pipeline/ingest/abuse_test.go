package ingest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// authCase is one request of TestAuthAbuseAndIsolation. Its batch holds
// one event tagged with the case's own event ID, so that whatever reached
// a topic can be traced back to the request that sent it.
type authCase struct {
	name    string
	query   string
	headers []string
	fields  string // extra fields of the event, with a leading comma
	status  int
	msg     string // the error body's message, exactly
	inMsg   string // or a part of it
	// For a 200: the app and organization the envelope must carry, and
	// whether the event went to the quarantine topic instead.
	app, org    string
	quarantined bool
}

// TestAuthAbuseAndIsolation sends batches with missing, malformed, wrong,
// revoked and borrowed credentials. Each refused request gets its status
// and message and stores nothing on either topic; each accepted one lands
// under the app and organization of the token that sent it, never under
// the app a body or a query parameter names.
func TestAuthAbuseAndIsolation(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	h.addToken("revoked", "org-a", "app-a1")
	must(t, h.store.RevokeToken(contenttest.Acting(t.Context()), h.tokenIDs["revoked"], time.Now()))
	// Tokens that may do things, but not send events.
	h.addScopedToken("contentOnly", "org-a", "app-a1", tenancy.ContentRead|tenancy.ContentWrite)
	h.addScopedToken("orgReader", "org-a", "", tenancy.ContentRead|tenancy.EventsRead)
	tok := h.tokens
	bearer := func(name string) []string { return []string{"Authorization", "Bearer " + tok[name]} }
	unknown := "cms_0123456789abcdef_" + strings.Repeat("A", 43)
	tampered := tok["a1"][:len(tok["a1"])-2] + "xx"
	const unauthorized = "Unauthorized"

	cases := []authCase{
		// Credentials that are missing or malformed.
		{name: "no Authorization header", status: 401, msg: unauthorized},
		{name: "empty Authorization header", headers: []string{"Authorization", ""}, status: 401, msg: unauthorized},
		{name: "scheme without a token", headers: []string{"Authorization", "Bearer"}, status: 401, msg: unauthorized},
		{name: "scheme and blanks", headers: []string{"Authorization", "Bearer    "}, status: 401, msg: unauthorized},
		{name: "Basic scheme", headers: []string{"Authorization", "Basic " + tok["a1"]}, status: 401, msg: unauthorized},
		{name: "Token scheme", headers: []string{"Authorization", "Token " + tok["a1"]}, status: 401, msg: unauthorized},
		{name: "no space after the scheme", headers: []string{"Authorization", "Bearer" + tok["a1"]}, status: 401, msg: unauthorized},
		{name: "token and trailing words", headers: []string{"Authorization", "Bearer " + tok["a1"] + " " + tok["a2"]}, status: 401, msg: unauthorized},
		{name: "token with 10 KiB appended", headers: []string{"Authorization", "Bearer " + tok["a1"] + strings.Repeat("A", 10<<10)}, status: 401, msg: unauthorized},
		{name: "token of non-ASCII bytes", headers: []string{"Authorization", "Bearer cms_\xff\xfe" + tok["a1"][6:]}, status: 401, msg: unauthorized},
		{name: "garbage token", headers: []string{"Authorization", "Bearer nope"}, status: 401, msg: unauthorized},
		// Credentials that are well formed but wrong.
		{name: "unknown token", headers: []string{"Authorization", "Bearer " + unknown}, status: 401, msg: unauthorized},
		{name: "tampered secret", headers: []string{"Authorization", "Bearer " + tampered}, status: 401, msg: unauthorized},
		{name: "revoked token", headers: bearer("revoked"), status: 401, msg: unauthorized},
		// A proxy may add an Authorization of its own: the Bearer header counts.
		{name: "Authorization Basic, Authorize Bearer", headers: []string{"Authorization", "Basic x", "Authorize", "Bearer " + tok["a1"]}, status: 200, app: "app-a1", org: "org-a"},
		{name: "both Bearer, Authorization wrong", headers: []string{"Authorization", "Bearer nope", "Authorize", "Bearer " + tok["a1"]}, status: 401, msg: unauthorized},
		// Tokens in the query string are never read, alone or beside a header.
		{name: "?token=", query: "?token=" + tok["a1"], status: 401, msg: unauthorized},
		{name: "?access_token=", query: "?access_token=" + tok["a1"], status: 401, msg: unauthorized},
		{name: "?apiKey=", query: "?apiKey=" + tok["a1"], status: 401, msg: unauthorized},
		{name: "?authorization=", query: "?authorization=" + url.QueryEscape("Bearer "+tok["a1"]), status: 401, msg: unauthorized},
		{name: "?Authorization= and ?Authorize=", query: "?Authorization=" + url.QueryEscape("Bearer "+tok["a1"]) + "&Authorize=" + url.QueryEscape("Bearer "+tok["a1"]), status: 401, msg: unauthorized},
		{name: "query token beside a revoked header", query: "?token=" + tok["a1"], headers: bearer("revoked"), status: 401, msg: unauthorized},
		{name: "query token of another app beside a header", query: "?access_token=" + tok["a2"], headers: bearer("a1"), status: 200, app: "app-a1", org: "org-a"},
		// The scheme is case-insensitive; either header spelling works.
		{name: "lower-case bearer", headers: []string{"Authorization", "bearer " + tok["a1"]}, status: 200, app: "app-a1", org: "org-a"},
		{name: "upper-case BEARER", headers: []string{"Authorization", "BEARER " + tok["a1"]}, status: 200, app: "app-a1", org: "org-a"},
		{name: "Authorize: bearer", headers: []string{"Authorize", "bearer " + tok["a2"]}, status: 200, app: "app-a2", org: "org-a"},
		// Another app's token: its events land under its own app.
		{name: "app token", headers: bearer("a2"), status: 200, app: "app-a2", org: "org-a"},
		{name: "app token, event naming another app", headers: bearer("a2"), fields: `,"appId":"app-a1"`, status: 200, app: "app-a2", org: "org-a", quarantined: true},
		{name: "app token, event naming another organization", headers: bearer("a1"), fields: `,"organizationId":"org-b"`, status: 200, app: "app-a1", org: "org-a"},
		{name: "app token, appId of another app", query: "?appId=app-a1", headers: bearer("a2"), status: 403, inMsg: `this token is for app "app-a2" and cannot act for app "app-a1"`},
		{name: "app token, appId of another organization's app", query: "?appId=app-b1", headers: bearer("a1"), status: 403, inMsg: "cannot act for app"},
		{name: "app token, its own appId then another", query: "?appId=app-a1&appId=app-b1", headers: bearer("a1"), status: 200, app: "app-a1", org: "org-a"},
		// Organization tokens name an app of their own organization.
		{name: "org token without appId", headers: bearer("orgA"), status: 400, inMsg: "appId query parameter is required"},
		{name: "org token with an empty appId", query: "?appId=", headers: bearer("orgA"), status: 400, inMsg: "appId query parameter is required"},
		{name: "org token with its app", query: "?appId=app-a2", headers: bearer("orgA"), status: 200, app: "app-a2", org: "org-a"},
		{name: "org token, event naming a sibling app", query: "?appId=app-a2", headers: bearer("orgA"), fields: `,"appId":"app-a1"`, status: 200, app: "app-a2", org: "org-a", quarantined: true},
		{name: "org token with a foreign appId", query: "?appId=app-b1", headers: bearer("orgA"), status: 403, msg: `app "app-b1" is not an app of this token's organization`},
		{name: "org token with an unknown appId", query: "?appId=app-zz", headers: bearer("orgA"), status: 403, msg: `app "app-zz" is not an app of this token's organization`},
		{name: "org token, foreign appId first", query: "?appId=app-b1&appId=app-a2", headers: bearer("orgA"), status: 403, inMsg: "not an app of this token's organization"},
		{name: "another organization's token", query: "?appId=app-a1", headers: bearer("orgB"), status: 403, msg: `app "app-a1" is not an app of this token's organization`},
		{name: "another organization's app token", query: "?appId=app-a1", headers: bearer("b1"), status: 403, inMsg: "cannot act for app"},
		// Tokens without events:write send nothing, whatever else they may do.
		{name: "token without events:write", headers: bearer("contentOnly"), status: 403, msg: "this token lacks the events:write scope needed for sending events"},
		{name: "org token without events:write", query: "?appId=app-a1", headers: bearer("orgReader"), status: 403, msg: "this token lacks the events:write scope needed for sending events"},
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := fmt.Sprintf(`{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s","eventId":"case-%d"%s}`, i, tc.fields)
			r := h.put("/cms/app/events"+tc.query, eventsBody(ev), tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			if tc.status != 200 {
				msg, _ := r.body["message"].(string)
				if r.body["errorType"] != "HandledError" || r.body["httpStatus"] != float64(tc.status) {
					t.Errorf("error body %s", r.raw)
				}
				if tc.msg != "" && msg != tc.msg {
					t.Errorf("message %q, want %q", msg, tc.msg)
				}
				if !strings.Contains(msg, tc.inMsg) {
					t.Errorf("message %q does not contain %q", msg, tc.inMsg)
				}
				return
			}
			want := map[bool][2]float64{false: {1, 0}, true: {0, 1}}[tc.quarantined]
			if r.body["accepted"] != want[0] || r.body["rejected"] != want[1] {
				t.Errorf("answer %s, want accepted %v rejected %v", r.raw, want[0], want[1])
			}
		})
	}

	// What each request stored, by the event ID it carried.
	stored := map[string][]record{}
	for _, topic := range []string{h.topic, h.quarantine} {
		for _, rec := range readTopic(t, b.Addr(), topic) {
			rec.topic = topic
			id, _ := rec.value["eventId"].(string)
			stored[id] = append(stored[id], rec)
		}
	}
	for i, tc := range cases {
		recs := stored[fmt.Sprintf("case-%d", i)]
		if tc.status != 200 {
			if len(recs) != 0 {
				t.Errorf("%s: refused with %d, yet %d records were stored: %v", tc.name, tc.status, len(recs), recs)
			}
			continue
		}
		wantTopic := map[bool]string{false: h.topic, true: h.quarantine}[tc.quarantined]
		if len(recs) != 1 || recs[0].topic != wantTopic {
			t.Errorf("%s: records %v, want one on %s", tc.name, recs, wantTopic)
			continue
		}
		env := recs[0].value
		if env["appId"] != tc.app || env["organizationId"] != tc.org || !strings.HasPrefix(recs[0].key, tc.app) {
			t.Errorf("%s: stored under app %v, organization %v, key %q; want %s and %s", tc.name, env["appId"], env["organizationId"], recs[0].key, tc.app, tc.org)
		}
		if !tc.quarantined && env["event"].(map[string]any)["appId"] != tc.app {
			t.Errorf("%s: event appId %v, want %s", tc.name, env["event"].(map[string]any)["appId"], tc.app)
		}
	}
}

// sendBatch PUTs body with token and reports the status and Retry-After;
// it is safe to call from any goroutine.
func sendBatch(c *http.Client, url, token, body string) (status int, retryAfter string, err error) {
	req, err := http.NewRequest(http.MethodPut, url+"/cms/app/events", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", err
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// steadyRun is what a steady sender saw over one window.
type steadyRun struct {
	ok, limited, other int
	took               time.Duration
}

func (r steadyRun) perSecond() float64 { return float64(r.ok) / r.took.Seconds() }

// sendSteadily sends one batch every period for window, as a runtime with
// regular traffic does, and counts the answers.
func sendSteadily(t *testing.T, c *http.Client, url, token string, period, window time.Duration) steadyRun {
	t.Helper()
	var r steadyRun
	tick := time.NewTicker(period)
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < window {
		<-tick.C
		status, _, err := sendBatch(c, url, token, eventsBody(launch("steady")))
		switch {
		case err != nil:
			t.Errorf("steady sender: %v", err)
			r.other++
		case status == 200:
			r.ok++
		case status == 429:
			r.limited++
		default:
			t.Errorf("steady sender: status %d", status)
			r.other++
		}
	}
	r.took = time.Since(start)
	return r
}

// TestRateLimitUnderAbuse floods one token from several goroutines, and
// the service with invalid tokens, while another token sends steadily.
// The flooded token is held to its rate with 429 and Retry-After; the
// invalid tokens get 401; the steady token never sees a 429 and keeps the
// throughput it had before the flood.
func TestRateLimitUnderAbuse(t *testing.T) {
	const (
		// A low rate, so that the flood passes it even when each request
		// is slow on a loaded machine.
		rps, burst = 10, 10
		// The steady sender asks for half its budget.
		period = 200 * time.Millisecond
		window = 3 * time.Second
		// The machine is small and shared: the steady sender must keep at
		// least this share of its own throughput measured without abuse.
		minRatio = 0.5
		// Each flooding goroutine sends as fast as it can, up to this rate:
		// 400 requests a second on the flooded token, forty times its
		// rate, and 200 with invalid tokens, without leaving the two cores
		// to the flood alone.
		floodEvery = 10 * time.Millisecond
	)
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{rateRPS: rps, rateBurst: burst})
	steadyClient := &http.Client{Transport: &http.Transport{}}
	floodClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(steadyClient.CloseIdleConnections)
	t.Cleanup(floodClient.CloseIdleConnections)

	before := sendSteadily(t, steadyClient, h.url, h.tokens["a2"], period, window)

	ctx, stop := context.WithCancel(t.Context())
	var (
		wg                                      sync.WaitGroup
		abuseOK, abuseLimited, abuseOther       atomic.Int64
		badRetryAfter, invalid401, invalidOther atomic.Int64
		firstLimited                            = make(chan struct{})
		once                                    sync.Once
	)
	// flood calls send until the flood stops, at most once per floodEvery.
	flood := func(send func()) {
		tick := time.NewTicker(floodEvery)
		defer tick.Stop()
		for ctx.Err() == nil {
			send()
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}
	floodStart := time.Now()
	for range 4 {
		wg.Go(func() {
			flood(func() {
				status, retryAfter, err := sendBatch(floodClient, h.url, h.tokens["a1"], eventsBody(launch("abuse")))
				switch {
				case err != nil:
					if ctx.Err() == nil {
						abuseOther.Add(1)
					}
				case status == 200:
					abuseOK.Add(1)
				case status == 429:
					abuseLimited.Add(1)
					once.Do(func() { close(firstLimited) })
					// At 10 requests a second a token is back within 100 ms.
					if retryAfter != "1" {
						badRetryAfter.Add(1)
					}
				default:
					abuseOther.Add(1)
				}
			})
		})
	}
	for i := range 2 {
		wg.Go(func() {
			flood(func() {
				token := "nope"
				if i == 1 { // well formed, so that each one is looked up
					tok, _, err := auth.NewToken()
					if err != nil {
						invalidOther.Add(1)
						return
					}
					token = tok
				}
				status, _, err := sendBatch(floodClient, h.url, token, eventsBody(launch("invalid")))
				switch {
				case err != nil:
					if ctx.Err() == nil {
						invalidOther.Add(1)
					}
				case status == 401:
					invalid401.Add(1)
				default:
					invalidOther.Add(1)
				}
			})
		})
	}
	select {
	case <-firstLimited:
	case <-time.After(30 * time.Second):
		stop()
		wg.Wait()
		t.Fatalf("the flooded token got no 429 within 30s: %d answered 200", abuseOK.Load())
	}
	during := sendSteadily(t, steadyClient, h.url, h.tokens["a2"], period, window)
	stop()
	wg.Wait()
	floodTook := time.Since(floodStart)

	ratio := during.perSecond() / before.perSecond()
	t.Logf("steady token: %.1f batches/s alone, %.1f under abuse (ratio %.2f); flooded token: %d answered 200, %d 429 in %s; invalid tokens: %d answered 401",
		before.perSecond(), during.perSecond(), ratio, abuseOK.Load(), abuseLimited.Load(), floodTook.Round(time.Millisecond), invalid401.Load())
	if before.limited+during.limited > 0 {
		t.Errorf("the steady token got %d 429s (%d before the flood)", before.limited+during.limited, before.limited)
	}
	if ratio < minRatio {
		t.Errorf("the steady token's throughput fell to %.2f of its own without abuse, want at least %.2f", ratio, minRatio)
	}
	if abuseLimited.Load() == 0 || badRetryAfter.Load() != 0 {
		t.Errorf("flooded token: %d 429s, %d of them without Retry-After: 1", abuseLimited.Load(), badRetryAfter.Load())
	}
	// A token bucket admits its burst plus its rate over the time.
	if most := int64(burst + rps*floodTook.Seconds() + 1); abuseOK.Load() > most || abuseOK.Load() < burst {
		t.Errorf("flooded token: %d answered 200 in %s, want %d to %d", abuseOK.Load(), floodTook, burst, most)
	}
	if abuseOther.Load() != 0 || invalidOther.Load() != 0 || invalid401.Load() == 0 {
		t.Errorf("unexpected answers: flooded token %d, invalid tokens %d (and %d 401s)", abuseOther.Load(), invalidOther.Load(), invalid401.Load())
	}
	// Only requests answered 200 stored anything.
	want := before.ok + during.ok + int(abuseOK.Load())
	if got := len(readTopic(t, b.Addr(), h.topic)); got != want {
		t.Errorf("events topic holds %d records, want %d", got, want)
	}
}

// TestRefusedBeforeTheBodyAnswersAtOnce: a request refused before its body
// is read (no token, a token without events:write) is answered at once
// and its connection closed, however slowly the body would come, so that
// refused requests cannot hold connections for the read timeout.
func TestRefusedBeforeTheBodyAnswersAtOnce(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{})
	h.addScopedToken("reader", "org-a", "app-a1", tenancy.ContentRead)
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"token without events:write", "Authorization: Bearer " + h.tokens["reader"] + "\r\n", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			_ = conn.SetDeadline(start.Add(10 * time.Second))
			// Headers of a 200 KB body of which nothing is sent.
			if _, err := io.WriteString(conn, "PUT /cms/app/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+tc.auth+"Content-Length: 200000\r\n\r\n{\"events\":["); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || !resp.Close {
				t.Errorf("status %d, close %v; want %d and a closed connection", resp.StatusCode, resp.Close, tc.status)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("answered after %s, waiting for the body", took)
			}
		})
	}
}

// TestTokenGuessingThrottledByNetwork: a client guessing tokens gets 401
// for its first failures, then 429 with Retry-After without the store
// being asked, while a token that works, used before from the same
// network, still sends.
func TestTokenGuessingThrottledByNetwork(t *testing.T) {
	b := startBroker(t, "")
	h := newHarness(t, b, harnessOpts{authFailures: 10})
	if r := h.put("/cms/app/events", eventsBody(`{"type":"REQUEST","name":"LAUNCH_REQUEST"}`), "Authorization", "Bearer "+h.tokens["a1"]); r.status != 200 {
		t.Fatalf("good token: %d %s", r.status, r.raw)
	}
	var statuses []int
	for i := range 30 {
		guess := fmt.Sprintf("cms_%016x_%s", i+1, strings.Repeat("A", 43))
		r := h.put("/cms/app/events", eventsBody(`{"type":"REQUEST","name":"LAUNCH_REQUEST"}`), "Authorization", "Bearer "+guess)
		statuses = append(statuses, r.status)
		if r.status == http.StatusTooManyRequests {
			if msg, _ := r.body["message"].(string); msg != "too many failed authentications from this network; retry after the time in Retry-After" || r.header.Get("Retry-After") == "" {
				t.Errorf("guess %d: %s %v", i, r.raw, r.header)
			}
		}
	}
	// The first guesses fail one by one; once the network's burst is
	// spent (one more may refill meanwhile), the rest are refused.
	unauthorized, limited := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
		}
	}
	if unauthorized < 10 || unauthorized > 12 || unauthorized+limited != 30 || statuses[29] != http.StatusTooManyRequests {
		t.Errorf("statuses %v: want 10 or so 401s, then 429s", statuses)
	}
	if r := h.put("/cms/app/events", eventsBody(`{"type":"REQUEST","name":"LAUNCH_REQUEST"}`), "Authorization", "Bearer "+h.tokens["a1"]); r.status != 200 {
		t.Errorf("the good token from the same network: %d %s", r.status, r.raw)
	}
}
