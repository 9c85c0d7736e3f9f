package loadgen

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

func TestBodies(t *testing.T) {
	cases := []struct {
		name string
		opts BodyOptions
		// want is the number of bodies and events per body.
		bodies, events, sessions int
		// size is about each event's size.
		size int
	}{
		{"defaults", BodyOptions{AppID: "demo-app"}, DefaultBodies, DefaultBatch, 10, 1050},
		{"no app id", BodyOptions{Count: 3}, 3, DefaultBatch, 10, 1050},
		{"small batches", BodyOptions{Count: 5, Events: 7, AppID: "a", Seed: 9}, 5, 7, 2, 1050},
		{"one session per event", BodyOptions{Count: 2, Events: 4, EventsPerSession: 1, AppID: "a"}, 2, 4, 4, 1050},
		{"one event", BodyOptions{Count: 3, Events: 1, AppID: "a"}, 3, 1, 1, 1050},
		{"knowledge-base size", BodyOptions{Count: 3, Events: 5, AppID: "a", EventBytes: 20 << 10}, 3, 5, 1, 20 << 10},
		{"size below an event's own", BodyOptions{Count: 2, Events: 2, AppID: "a", EventBytes: 500}, 2, 2, 1, 1050},
	}
	v := event.NewValidator(event.Limits{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bodies := Bodies(tc.opts)
			if len(bodies) != tc.bodies {
				t.Fatalf("%d bodies, want %d", len(bodies), tc.bodies)
			}
			app := tc.opts.AppID
			if app == "" {
				app = "filled-in"
			}
			meta := event.Meta{AppID: app, OrganizationID: "org", ReceivedAt: time.Now(), IDSeed: "s"}
			seen := map[string]bool{}
			for i, b := range bodies {
				if seen[string(b)] {
					t.Fatalf("body %d repeats an earlier one", i)
				}
				seen[string(b)] = true
				res, err := v.ProcessBatch(b, meta)
				if err != nil {
					t.Fatalf("body %d: %v", i, err)
				}
				if len(res.Errors) != 0 || len(res.Accepted) != tc.events {
					t.Fatalf("body %d: %d accepted, errors %v", i, len(res.Accepted), res.Errors)
				}
				var parsed struct{ Events []json.RawMessage }
				if err := json.Unmarshal(b, &parsed); err != nil {
					t.Fatalf("body %d is not JSON for encoding/json: %v", i, err)
				}
				keys := map[string]bool{}
				for j, ev := range parsed.Events {
					if n := len(ev); n < tc.size*85/100 || n > tc.size*115/100 {
						t.Errorf("body %d event %d is %d bytes, want about %d", i, j, n, tc.size)
					}
					keys[string(res.Accepted[j].Key)] = true
				}
				if len(keys) != tc.sessions {
					t.Errorf("body %d spans %d sessions, want %d", i, len(keys), tc.sessions)
				}
			}
		})
	}
}

func TestBodiesDeterministic(t *testing.T) {
	a := Bodies(BodyOptions{Count: 4, Seed: 1})
	b := Bodies(BodyOptions{Count: 4, Seed: 1})
	c := Bodies(BodyOptions{Count: 4, Seed: 2})
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Errorf("body %d differs for the same seed", i)
		}
		if bytes.Equal(a[i], c[i]) {
			t.Errorf("body %d is the same for another seed", i)
		}
	}
}

func TestRecords(t *testing.T) {
	bodies := Bodies(BodyOptions{Count: 3, AppID: "demo-app"})
	recs, err := Records(bodies, event.Meta{AppID: "demo-app", OrganizationID: "demo-org", ReceivedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || len(recs[0]) != DefaultBatch {
		t.Fatalf("got %d record sets of %d", len(recs), len(recs[0]))
	}
	if _, err := Records(bodies, event.Meta{AppID: "other-app"}); err == nil {
		t.Error("events of another app gave no error")
	}
}
