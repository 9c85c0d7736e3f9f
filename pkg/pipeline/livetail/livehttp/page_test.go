package livehttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/headless"
	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/pipeline/livetail"
)

// TestPageInABrowser: in headless Chromium, a person pastes a token and
// presses Watch; the page reads the stream with the token in a header
// (never in an address), draws each event as a row, marks quarantined
// ones with their reasons, shows what events hold as text only, and
// holds rows back while paused.
func TestPageInABrowser(t *testing.T) {
	const token = "cms_0123456789abcdef_secretsecretsecretsecretsecretsecretsecr"
	hub := livetail.NewHub(livetail.Config{EventsTopic: eventsTopic, QuarantineTopic: quarantineTopic, EventsPerSecond: 1000}, source{}, nil, quiet)
	h := New(hub, Config{Summary: 200 * time.Millisecond}, nil, quiet)
	var mu sync.Mutex
	var asked []string // the stream requests: URL and Authorization
	page := Page()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpserve.WantsPage(r) || r.URL.Path != Path {
			page.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		asked = append(asked, r.URL.String()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errorType":"HandledError","httpStatus":401,"message":"Unauthorized"}`))
			return
		}
		h.Stream(w, r, auth.Target{OrganizationID: "org", AppID: "a"}, func(context.Context) error { return nil })
	}))
	// Cleanups run last first: the browser goes, the hub ends the
	// streams, then the server closes.
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close)

	p := headless.Open(t.Context(), t, srv.URL+Path, 1200, 800)
	// A wrong token is refused, and the page says so.
	p.MustEval(`document.getElementById("token").value = "cms_wrong"; document.getElementById("start").click()`, nil)
	p.WaitFor(`document.getElementById("status").textContent.startsWith("401: Unauthorized")`, 10*time.Second)

	p.MustEval(`document.getElementById("token").value = "`+token+`"; document.getElementById("type").value = "REQUEST"; document.getElementById("start").click()`, nil)
	p.WaitFor(`document.getElementById("status").textContent.startsWith("Connected to a")`, 10*time.Second)
	hub.Reading(kafka.Resumption{First: true})
	p.WaitFor(`document.getElementById("status").textContent.startsWith("Reading the events")`, 10*time.Second)

	hub.Message(envelope("a", "stored-1", `{"text":"<img src=x onerror=alert(1)>"}`))
	hub.Message(kafka.Message{Topic: quarantineTopic, Key: []byte("a"), Value: []byte(`{"v":1,"appId":"a","receivedAt":"2026-05-06T07:08:09.120Z","eventId":"quarantined-1",` +
		`"errors":[{"field":"payload.request.matchConfidence","reason":"wrong_type","message":"must be a number or null, got string"}],` +
		`"event":{"appId":"a","type":"REQUEST","name":"<b>bold</b>","sessionId":"s","payload":{"request":{"matchConfidence":"high"}}}}`)})
	// Not a REQUEST: the page's filter leaves it out.
	hub.Message(kafka.Message{Topic: eventsTopic, Key: []byte("a/s"), Value: []byte(`{"v":1,"eventId":"error-1","appId":"a","receivedAt":"t","event":{"appId":"a","type":"ERROR","name":"E"}}`)})
	p.WaitFor(`document.querySelectorAll("#rows tr").length === 2`, 10*time.Second)
	var rows []struct{ ID, Status, Class, Text string }
	p.MustEval(`[...document.querySelectorAll("#rows tr")].map(tr => ({id: tr.dataset.eventId, status: tr.dataset.status, class: tr.className, text: tr.textContent}))`, &rows)
	if len(rows) != 2 || rows[0].ID != "quarantined-1" || rows[1].ID != "stored-1" {
		t.Fatalf("rows %+v, want the quarantined event above the stored one", rows)
	}
	if rows[0].Class != "quarantined" || !strings.Contains(rows[0].Text, "payload.request.matchConfidence wrong_type: must be a number or null, got string") ||
		!strings.Contains(rows[0].Text, "<b>bold</b>") {
		t.Errorf("the quarantined row: %+v", rows[0])
	}
	if rows[1].Class != "" || !strings.Contains(rows[1].Text, "<img src=x onerror=alert(1)>") {
		t.Errorf("the stored row: %+v", rows[1])
	}
	var markup int
	p.MustEval(`document.querySelectorAll("#rows img, #rows b").length`, &markup)
	if markup != 0 {
		t.Errorf("%d elements made of what events hold", markup)
	}
	p.WaitFor(`document.getElementById("counts").textContent.includes("2 shown")`, 10*time.Second)

	// Paused, rows wait; resumed, they are drawn.
	p.MustEval(`document.getElementById("pause").click()`, nil)
	hub.Message(envelope("a", "while-paused", `{}`))
	p.WaitFor(`document.getElementById("pause").textContent === "Resume (1 waiting)"`, 10*time.Second)
	var n int
	p.MustEval(`document.querySelectorAll("#rows tr").length`, &n)
	if n != 2 {
		t.Errorf("%d rows while paused, want 2", n)
	}
	p.MustEval(`document.getElementById("pause").click()`, nil)
	p.WaitFor(`document.querySelectorAll("#rows tr").length === 3`, 10*time.Second)

	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		if u, _, _ := strings.Cut(a, " "); strings.Contains(u, "secret") || strings.Contains(u, "cms_") {
			t.Errorf("the token is in the address the page asked for: %s", u)
		}
	}
	if len(asked) != 2 || !strings.HasSuffix(asked[1], "Bearer "+token) || !strings.Contains(asked[1], "type=REQUEST") {
		t.Errorf("the page asked %q, want the stream with its filter and the token in Authorization", asked)
	}
}
