package columns

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/eventfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

const fuzzFixtureDir = "../../../schemas/events/testdata"

// fuzzSeeds returns every schema fixture as a batch body.
func fuzzSeeds(tb testing.TB) [][]byte { return eventfixture.Batches(tb, fuzzFixtureDir) }

// FuzzDecodePublished checks that whatever ingest publishes, the consumer
// can decode: every envelope of an accepted event becomes a row with the
// event's ID, and every quarantine record a row naming its event.
func FuzzDecodePublished(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	meta := event.Meta{
		AppID:          "app-1",
		OrganizationID: "org-1",
		ReceivedAt:     time.Date(2024, 5, 6, 7, 8, 9, 120_000_000, time.UTC),
		IDSeed:         "seed",
		TokenID:        "token-1",
		ClientNetwork:  "203.0.113.0/24",
	}
	validators := []*event.Validator{
		event.NewValidator(event.DefaultLimits()),
		event.NewValidator(event.Limits{MaxEvents: 3, MaxEventBytes: 96}),
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range validators {
			res, err := v.ProcessBatch(body, meta)
			if err != nil {
				continue // refused whole: nothing is published
			}
			checkDecodes(t, res)
		}
	})
}

func checkDecodes(t *testing.T, res *event.Result) {
	t.Helper()
	var dec Decoder
	var rows chstore.EventBatch
	ids := acceptedIDs(t, res)
	for i, m := range res.Accepted {
		row, err := dec.Decode(m.Value, &rows)
		if err != nil || rows.EventID[row] != ids[i] || rows.AppID[row] != "app-1" || rows.TokenID[row] != "token-1" {
			t.Fatalf("accepted value %d does not decode (%v): %q", i, err, m.Value)
		}
	}
	if rows.Len() != len(res.Accepted) {
		t.Fatalf("%d rows of %d envelopes", rows.Len(), len(res.Accepted))
	}
	for i, m := range res.Quarantined {
		q, err := dec.DecodeQuarantine(m.Value)
		if err != nil {
			t.Fatalf("quarantined value %d does not decode (%v): %q", i, err, m.Value)
		}
		var rec struct {
			Index int `json:"index"`
		}
		if err := json.Unmarshal(m.Value, &rec); err != nil || q.Index != rec.Index || q.AppID != "app-1" || q.Reason == "" {
			t.Fatalf("quarantined value %d decodes to %+v (%v): %q", i, q, err, m.Value)
		}
	}
}
