package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/headless"
	"github.com/assistantcms/cms/internal/livewatch"
	"github.com/assistantcms/cms/pkg/pipeline/livetail/livehttp"
)

// liveMaxEventBytes quarantines the knowledge-base events of the run (100
// to 160 KB) as too large, and liveTypes the ERROR events as a type not
// admitted: the run then has quarantined events of two reasons.
const (
	liveMaxEventBytes = 64 << 10
	liveTypes         = "REQUEST,AnalyticsEvent,MessageEvent,LambdaSuccessEvent,LambdaErrorEvent"
)

// shown is how an event is told apart on the stream and on the page: the
// runtime sends no event IDs, and sets the handler per turn.
type shown struct {
	session, typ, name, handler, status, reasons string
}

// TestLiveViewOfTheRuntime runs the runtime built on the reference client
// (runtime.js) against the whole stack while a watcher listens through
// the gateway and the live page is open in headless Chromium: every event
// the runtime sent appears once on the stream and on the page, stored or
// quarantined with the reasons ingest answered. LIVE_SCREENSHOT=path.png
// keeps the page's picture (docs/live.png).
func TestLiveViewOfTheRuntime(t *testing.T) {
	node := referenceClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := startStack(ctx, t, map[string][]string{
		"ingest": {fmt.Sprintf("MAX_EVENT_BYTES=%d", liveMaxEventBytes), "EVENT_TYPES=" + liveTypes},
		"api":    {"LIVE_EVENTS_PER_SECOND=1000", "LIVE_SUMMARY_INTERVAL=500ms"},
	})
	one := "http://" + st.Gateway

	watcher, err := livewatch.Open(ctx, one+livehttp.Path, st.ManagementToken, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	if err := watcher.WaitReading(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The page, as a person uses it: the token pasted, Watch pressed.
	page := headless.Open(ctx, t, one+livehttp.Path, 1400, 900)
	page.MustEval(`document.getElementById("token").value = `+jsString(st.ManagementToken)+`; document.getElementById("start").click()`, nil)
	page.WaitFor(`document.getElementById("status").textContent.startsWith("Reading the events")`, 60*time.Second)

	m := runRuntime(ctx, t, node, st)
	want := sentEvents(t, m)
	quarantined := 0
	for k, n := range want {
		if k.status == "quarantined" {
			quarantined += n
		}
	}
	total := 0
	for _, n := range want {
		total += n
	}
	reasons := map[string]bool{}
	for k := range want {
		if k.reasons != "" {
			reasons[k.reasons] = true
		}
	}
	if quarantined == 0 || len(reasons) < 2 {
		t.Fatalf("the run quarantined %d events for %v: the settings should quarantine events for two reasons", quarantined, slices.Collect(maps.Keys(reasons)))
	}

	// The stream: each event once, as ingest answered it.
	got := map[shown]int{}
	ids := map[string]bool{}
	for n := 0; n < total; n++ {
		msg, err := watcher.Skip("event", 60*time.Second, "summary", "state")
		if err != nil {
			t.Fatalf("after %d of %d events: %v", n, total, err)
		}
		var ev struct {
			livewatch.Event
			SelectedHandler string `json:"selectedHandler"`
		}
		if err := msg.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ids[ev.EventID] {
			t.Errorf("event %s shown twice", ev.EventID)
		}
		ids[ev.EventID] = true
		var rs []string
		for _, r := range ev.Reasons {
			rs = append(rs, r.Field+" "+r.Reason)
		}
		got[shown{ev.SessionID, ev.Type, ev.Name, ev.SelectedHandler, ev.Status, strings.Join(rs, "; ")}]++
	}
	if !maps.Equal(got, want) {
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%+v: shown %d times, sent %d", k, got[k], n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%+v: shown %d times, never sent", k, n)
			}
		}
	}
	// Nothing else: the summaries count these events alone.
	if sum, err := watcher.WaitSummary(30*time.Second, func(s livewatch.Summary) bool { return s.Total.Seen >= uint64(total) }); err != nil || sum.Total.Seen != uint64(total) {
		t.Errorf("summary %+v (%v), want %d events seen", sum, err, total)
	}

	// The page: a row per event, quarantined rows marked with their
	// reasons, and the token in no address it asked for.
	page.WaitFor(fmt.Sprintf(`document.querySelectorAll("#rows tr").length === %d`, total), 60*time.Second)
	var rows struct{ Quarantined, Reasons int }
	page.MustEval(`({quarantined: document.querySelectorAll("#rows tr.quarantined").length,
		reasons: document.querySelectorAll("#rows tr.quarantined ul.reasons li").length})`, &rows)
	if rows.Quarantined != quarantined || rows.Reasons < quarantined {
		t.Errorf("the page shows %d quarantined rows with %d reasons, want %d with theirs", rows.Quarantined, rows.Reasons, quarantined)
	}
	page.WaitFor(fmt.Sprintf(`document.getElementById("counts").textContent.includes("Since Watch: %d seen")`, total), 30*time.Second)
	var fetched []string
	page.MustEval(`performance.getEntriesByType("resource").map(e => e.name)`, &fetched)
	if !slices.ContainsFunc(fetched, func(u string) bool { return strings.Contains(u, livehttp.Path) }) {
		t.Errorf("the page fetched %q, not the stream", fetched)
	}
	for _, u := range fetched {
		if strings.Contains(u, st.ManagementToken) || strings.Contains(u, "cms_") {
			t.Errorf("the token is in an address the page fetched: %s", u)
		}
	}
	// Scrolled to the first quarantined row (the table is newest first):
	// the picture shows stored and quarantined events together.
	page.MustEval(`document.querySelector("#rows tr.quarantined").scrollIntoView({block: "center"});
		document.querySelector("#rows tr:not(.quarantined) td.detail details").open = true`, nil)
	shot := page.Screenshot()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	if n := pixels(img, [3]uint8{0xfd, 0xe0, 0xdd}); n < 2000 {
		t.Errorf("%d pixels in the quarantined rows' colour, want a marked row or more", n)
	}
	if keep := os.Getenv("LIVE_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, shot, 0o644); err != nil {
			t.Errorf("keep the screenshot: %v", err)
		}
	}
	t.Logf("%d events on the stream and the page, %d quarantined for %v", total, quarantined, slices.Collect(maps.Keys(reasons)))
}

// sentEvents are the events of the run's answered PUTs, counted by how
// the stream must show them: quarantined with the reasons ingest
// answered, else stored.
func sentEvents(t *testing.T, m manifest) map[shown]int {
	t.Helper()
	out := map[shown]int{}
	for i, p := range m.Puts {
		if p.Status != 200 {
			t.Errorf("PUT %d (turn %s): status %d, answer %s", i, p.Turn, p.Status, p.Answer)
			continue
		}
		var a struct {
			Errors []struct {
				Index         int
				Field, Reason string
			}
		}
		if err := json.Unmarshal(p.Answer, &a); err != nil {
			t.Fatalf("PUT %d: answer %s: %v", i, p.Answer, err)
		}
		byIndex := map[int][]string{}
		for _, e := range a.Errors {
			byIndex[e.Index] = append(byIndex[e.Index], e.Field+" "+e.Reason)
		}
		for j, raw := range p.Events {
			var f map[string]any
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			k := shown{session: str(f["sessionId"]), typ: str(f["type"]), name: str(f["name"]), handler: str(f["selectedHandler"]), status: "stored"}
			if rs, ok := byIndex[j]; ok {
				k.status, k.reasons = "quarantined", strings.Join(rs, "; ")
			}
			out[k]++
		}
	}
	return out
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pixels counts the pixels of colour c.
func pixels(img image.Image, c [3]uint8) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == c[0] && uint8(g>>8) == c[1] && uint8(bl>>8) == c[2] {
				n++
			}
		}
	}
	return n
}
