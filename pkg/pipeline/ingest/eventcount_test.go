package ingest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// TestEventCounter counts the events of bodies read in chunks of every
// size, and agrees with the validator on every body it accepts.
func TestEventCounter(t *testing.T) {
	ev := `{"type":"REQUEST","name":"N"}`
	cases := []struct {
		name string
		body string
		want int
	}{
		{"one event", `{"events":[` + ev + `]}`, 1},
		{"three events, blanks", " {\n \"events\" : [ " + ev + " ,\t" + ev + " , " + ev + " ] } ", 3},
		{"events not objects", `{"events":[1,"two",null,[3],true]}`, 5},
		{"brackets and quotes in strings", `{"events":[{"type":"a[\"{,]","name":"}],["}, {"type":"\\","name":"\\\""}]}`, 2},
		{"nested arrays and objects", `{"events":[{"type":"R","name":"N","payload":{"a":[[1,2],{"b":[3]}]}},[[],[]]]}`, 2},
		{"other keys before and after", `{"meta":[1,2,3],"x":{"events":[1,2]},"events":[` + ev + `],"y":["events"]}`, 1},
		{"a value named events", `{"k":"events","v":[1,2]}`, 0},
		{"a key that begins like events", `{"eventsX":[1,2],"event":[3],"events":[4]}`, 1},
		{"an escaped key", `{"\u0065vents":[1,2]}`, 2},
		{"empty", `{"events":[]}`, 0},
		{"no events", `{}`, 0},
		{"events not an array", `{"events":{"a":1}}`, 0},
		{"a root array", `[{"events":[1]},1]`, 0},
	}
	v := event.NewValidator(event.Limits{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for size := 1; size <= len(c.body); size++ {
				var ec eventCounter
				got := 0
				for i := 0; i < len(c.body); i += size {
					got += ec.count([]byte(c.body[i:min(i+size, len(c.body))]))
				}
				if got != c.want || ec.events != c.want {
					t.Fatalf("in chunks of %d: %d events (%d counted), want %d", size, got, ec.events, c.want)
				}
			}
			res, err := v.ProcessBatch([]byte(c.body), event.Meta{AppID: "a", OrganizationID: "o", ReceivedAt: time.Now()})
			if err == nil {
				if n := len(res.Accepted) + len(res.Quarantined); n != c.want {
					t.Errorf("the validator found %d events, the counter %d", n, c.want)
				}
			}
		})
	}
	// A large batch in one read.
	var ec eventCounter
	big := `{"events":[` + strings.Repeat(ev+",", 99_999) + ev + `]}`
	if got := ec.count([]byte(big)); got != 100_000 {
		t.Errorf("a batch of 100000 events: %d", got)
	}
}

// TestEventsChargedToTheBodyMemory sends batches of tiny events whose
// bytes fit an app's share of the body memory many times over: each
// event is charged MemoryPerEvent too, before the validator builds its
// record, so a batch of more events than the share holds is refused 429
// naming the share, and one within it is accepted.
func TestEventsChargedToTheBodyMemory(t *testing.T) {
	const share = 4 << 20 // bytes
	ev := `{"type":"REQUEST","name":"N"},`
	cases := []struct {
		name   string
		events int
		status int
	}{
		{"within the share", share / 2 / MemoryPerEvent, http.StatusOK},
		{"more events than the share holds", share/MemoryPerEvent + 1, http.StatusTooManyRequests},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, m := newTestHandler(&blockingPublisher{}, Config{MaxBodyMemoryPerApp: share, MaxBodyMemoryPerToken: share,
				EventRatePerToken: -1, EventRatePerApp: -1, EventRatePerOrg: -1})
			b := `{"events":[` + strings.Repeat(ev, c.events-1) + ev[:len(ev)-1] + `]}`
			if int64(len(b))*MemoryPerBodyByte > share/2 {
				t.Fatalf("the body's %d bytes alone take half the share", len(b))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/cms/app/events", strings.NewReader(b)))
			if rec.Code != c.status {
				t.Fatalf("%d events in %d bytes: %d %s, want %d", c.events, len(b), rec.Code, rec.Body, c.status)
			}
			if c.status == http.StatusTooManyRequests {
				want := fmt.Sprintf(`the bodies of app \"a1\" in flight hold its share of the memory for request bodies (%d bytes); retry later`, share)
				if !strings.Contains(rec.Body.String(), want) || rec.Header().Get("Retry-After") != "1" {
					t.Errorf("answer %s, Retry-After %q; want %s", rec.Body, rec.Header().Get("Retry-After"), want)
				}
				if n := testutil.ToFloat64(m.refusals.WithLabelValues(budgetAppMemory)); n != 1 {
					t.Errorf("%v refusals counted for the app's body memory, want 1", n)
				}
			}
			if _, _, _, free := h.admission.inUse(); free != h.cfg.MaxBodyMemory {
				t.Errorf("%d of the body memory left after the answer, want all %d", free, h.cfg.MaxBodyMemory)
			}
		})
	}
}
