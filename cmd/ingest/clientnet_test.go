package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/tenancy"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

// clientFrom is an HTTP client whose connections come from the local
// address source ("" lets the system pick: 127.0.0.1 on loopback).
func clientFrom(t *testing.T, source string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// putEvents sends body to p's events endpoint with token and, when set,
// an X-Forwarded-For header.
func putEvents(t *testing.T, c *http.Client, p *ingestProc, token, xff string, body []byte) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, p.base+"/cms/app/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// wrongToken is a well-formed token of an ID nobody issued.
func wrongToken(i int) string {
	return fmt.Sprintf("cms_%016x_%s", 0xfeed0000+i, strings.Repeat("A", 43))
}

// clientNetworks are the clientNetwork fields of the records on topic.
func clientNetworks(t *testing.T, p *ingestProc, topic string) []string {
	t.Helper()
	var out []string
	for _, m := range readAll(t, p.broker.Addr(), topic) {
		v := string(m.Value)
		_, rest, ok := strings.Cut(v, `"clientNetwork":"`)
		if !ok {
			t.Fatalf("a record without clientNetwork: %s", v)
		}
		net, _, _ := strings.Cut(rest, `"`)
		out = append(out, net)
	}
	slices.Sort(out)
	return out
}

// TestForwardedForFromAnUntrustedPeerChangesNothing is the binary as
// configured by default: no proxy is trusted, not even loopback, so a
// client that reaches ingest directly cannot name itself another network
// in X-Forwarded-For. Sixty wrong tokens, each "from" another network,
// meet the bound on one network's failures (AUTH_FAILURE_BURST, 30), and
// events each "from" another network are all recorded as the peer's, so
// that they count as one source of HISTORICAL suggestions.
func TestForwardedForFromAnUntrustedPeerChangesNothing(t *testing.T) {
	p := startIngest(t)
	c := clientFrom(t, "")
	var limited, refused int
	for i := range 60 {
		resp, body := putEvents(t, c, p, wrongToken(i), fmt.Sprintf("198.51.%d.7", i), batchOf(launchEvent))
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			refused++
		case http.StatusTooManyRequests:
			limited++
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many failed authentications from this network") {
				t.Errorf("429 without Retry-After or its reason: %v %s", resp.Header, body)
			}
		default:
			t.Fatalf("wrong token %d: %d %s", i, resp.StatusCode, body)
		}
	}
	t.Logf("60 wrong tokens, each with another X-Forwarded-For: %d refused 401, %d limited 429", refused, limited)
	// 30 at once, and one a second while they are sent.
	if limited < 25 || refused > 35 {
		t.Errorf("%d limited, %d refused: the bound on one network's failures was moved by X-Forwarded-For", limited, refused)
	}

	// Six events, six made-up networks: all the peer's.
	for i := range 6 {
		ev := strings.ReplaceAll(launchEvent, `"userId":"u"`, `"userId":"u`+strconv.Itoa(i)+`"`)
		if resp, body := putEvents(t, c, p, p.tokens["a"], fmt.Sprintf("203.0.%d.9", 10+i), batchOf(ev)); resp.StatusCode != http.StatusOK {
			t.Fatalf("event %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if got, want := clientNetworks(t, p, "bin-events"), slices.Repeat([]string{"127.0.0.0/24"}, 6); !slices.Equal(got, want) {
		t.Errorf("events record the networks %q, want the peer's alone %q", got, want)
	}
}

// TestTrustedGatewayNamesTheClient: with TRUSTED_PROXIES naming the
// gateway's own address (as the local stack's 127.0.0.2), what it
// forwards names the client, while another local client's header is
// still ignored.
func TestTrustedGatewayNamesTheClient(t *testing.T) {
	p := startIngest(t, "TRUSTED_PROXIES=127.0.0.2")
	gateway, other := clientFrom(t, "127.0.0.2"), clientFrom(t, "")
	for i, c := range []*http.Client{gateway, other} {
		ev := strings.ReplaceAll(launchEvent, `"userId":"u"`, `"userId":"u`+strconv.Itoa(i)+`"`)
		if resp, body := putEvents(t, c, p, p.tokens["a"], "203.0.113.9", batchOf(ev)); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if got, want := clientNetworks(t, p, "bin-events"), []string{"127.0.0.0/24", "203.0.113.0/24"}; !slices.Equal(got, want) {
		t.Errorf("events record the networks %q, want the gateway's client and the other local client %q", got, want)
	}
}

// TestValidTokenNotRefusedForOthersFailures: one client behind a network
// spends its failures on wrong tokens until it is answered 429; a valid
// token from the same network that ingest has not seen before is still
// accepted, and so, within Retry-After, is one made after the flood
// began, while the wrong tokens go on being refused.
func TestValidTokenNotRefusedForOthersFailures(t *testing.T) {
	p := startIngest(t)
	c := clientFrom(t, "")
	limited := false
	for i := range 40 {
		if resp, _ := putEvents(t, c, p, wrongToken(i), "", batchOf(launchEvent)); resp.StatusCode == http.StatusTooManyRequests {
			limited = true
		}
	}
	if !limited {
		t.Fatal("40 wrong tokens from one network were never limited")
	}
	if resp, body := putEvents(t, c, p, p.tokens["b"], "", batchOf(launchEvent)); resp.StatusCode != http.StatusOK {
		t.Errorf("a valid token not used before, from the network past its bound: %d %s", resp.StatusCode, body)
	}

	// A token made now, in the database ingest reads.
	store, err := tenancydb.Open(t.Context(), contentDB(t, p))
	if err != nil {
		t.Fatal(err)
	}
	tok, id, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	err = store.CreateToken(contenttest.Acting(t.Context()), tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: id, Hash: auth.HashToken(tok), OrganizationID: "o", AppID: "a", CreatedAt: time.Now()})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body := putEvents(t, c, p, tok, "", batchOf(launchEvent))
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a token made past the bound: %d %s", resp.StatusCode, body)
		}
		wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || wait < 1 || wait > 2 {
			t.Fatalf("Retry-After %q, want a second or two", resp.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(wait) * time.Second)
	}
	// The wrong tokens are limited still: at most the second's failures
	// pass.
	codes := map[int]int{}
	for i := range 5 {
		resp, _ := putEvents(t, c, p, wrongToken(1000+i), "", batchOf(launchEvent))
		codes[resp.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] < 3 {
		t.Errorf("5 wrong tokens after: %v, want 429 for most", codes)
	}
}

// contentDB is the content database p reads.
func contentDB(t *testing.T, p *ingestProc) string {
	t.Helper()
	for _, kv := range slices.Backward(p.cmd.Env) {
		if db, ok := strings.CutPrefix(kv, "CONTENT_DB="); ok {
			return db
		}
	}
	t.Fatal("ingest was started without CONTENT_DB")
	return ""
}

// TestRefusalTimeDoesNotTellAnIDOverHTTP measures, over HTTP against the
// binary, how long a token of an ID nobody issued (a new one each time,
// so a store lookup each time) takes to be refused, and a known ID with
// a wrong secret (cached, as a token in use is): the same, so the time
// does not tell which IDs exist.
func TestRefusalTimeDoesNotTellAnIDOverHTTP(t *testing.T) {
	// No bound on failures: the measurement makes hundreds.
	p := startIngest(t, "AUTH_FAILURE_RATE=0")
	c := clientFrom(t, "")
	known := p.tokens["a"]
	if resp, body := putEvents(t, c, p, known, "", batchOf(launchEvent)); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	wrong := known[:len(known)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(known, "A")]
	body := batchOf(launchEvent)
	refuse := func(tok string) time.Duration {
		start := time.Now()
		resp, _ := putEvents(t, c, p, tok, "", body)
		took := time.Since(start)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
		return took
	}
	var unknown, wrongSecret []time.Duration
	for i := range 600 {
		// In random order, so that drift falls on both alike.
		if rand.IntN(2) == 0 {
			unknown = append(unknown, refuse(wrongToken(i)))
			wrongSecret = append(wrongSecret, refuse(wrong))
		} else {
			wrongSecret = append(wrongSecret, refuse(wrong))
			unknown = append(unknown, refuse(wrongToken(i)))
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	u, k := median(unknown), median(wrongSecret)
	t.Logf("median refusal over HTTP: unknown ID %v, known ID with a wrong secret %v", u, k)
	if r := float64(max(u, k)) / float64(min(u, k)); r > 1.1 {
		t.Errorf("unknown ID %v vs known ID %v: ratio %.2f over 1.1", u, k, r)
	}
}
