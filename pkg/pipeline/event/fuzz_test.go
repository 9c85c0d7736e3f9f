package event

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/eventfixture"
)

const fuzzFixtureDir = "../../../schemas/events/testdata"

// fuzzSeeds returns every schema fixture as a batch body plus a few bodies
// aimed at the edges of the batch format.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	seeds := eventfixture.Batches(tb, fuzzFixtureDir)
	for _, s := range []string{
		``,
		`{}`,
		`{"events":[]}`,
		`{"events":{}}`,
		`[{"type":"REQUEST","name":"LAUNCH_REQUEST"}]`,
		`{"events":[1,"x",null,true,[],{}]}`,
		`{"events":[{"type":"REQUEST","name":"A","sessionId":"s"},{"type":"ERROR","name":"B","eventId":"e"},{"name":"C"}]}`,
		`{"events":[{"type":"REQUEST","name":"A","type":"ERROR"}]}`,
		`{"events":[{"type":"REQUEST","name":"A"}],"events":[]}`,
		`{"events":[{"type":"REQUEST","name":"A"}]} `,
		`{"events":[{"type":"REQUEST","name":"A"}]}}`,
		`{"events":[{"type":"REQUEST","name":"\ud83d\ude00\u00e9\"\\\/\b\f\n\r\t"}]}`,
		`{"events":[{"type":"REQUEST","name":"\ud800"}]}`,
		"{\"events\":[{\"type\":\"REQUEST\",\"name\":\"\xff\xfe\"}]}",
		`{"events":[{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":"{\"request\":{},\"response\":{\"outputSpeech\":\"hi\"}}"}]}`,
		`{"events":[{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":"{\"request\":{},\"response\":{}} x"}]}`,
		`{"events":[{"type":"AnalyticsEvent","name":"N","payload":[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]}]}`,
		`{"events":[{"type":"AnalyticsEvent","name":"N","payload":{"n":-0.0e-0,"m":1E400,"k":123456789012345678901234567890}}]}`,
		`{"events":[{"type":"REQUEST","name":"A","appId":"app-2"}]}`,
		`{"events":[{"type":"REQUEST","name":"A","eventId":"x","sessionId":null}]}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzProcessBatch checks invariants that hold for every body: the batch
// is refused as a whole or every event ends up either accepted or reported,
// and every record produced is JSON.
func FuzzProcessBatch(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	meta := Meta{
		AppID:          "app-1",
		OrganizationID: "org-1",
		ReceivedAt:     time.Date(2024, 5, 6, 7, 8, 9, 120_000_000, time.UTC),
		IDSeed:         "seed",
	}
	validators := []struct {
		name string
		v    *Validator
	}{
		{"default", NewValidator(DefaultLimits())},
		{"tiny", NewValidator(Limits{MaxEvents: 3, MaxEventBytes: 96, Types: DefaultLimits().Types})},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, tc := range validators {
			res, err := tc.v.ProcessBatch(body, meta)
			checkBatchInvariants(t, tc.name, tc.v.Limits(), body, res, err)
		}
	})
}

func checkBatchInvariants(t *testing.T, name string, limits Limits, body []byte, res *Result, err error) {
	t.Helper()
	if err != nil {
		var be *BatchError
		switch {
		case !errors.As(err, &be):
			t.Fatalf("%s: error %T %v is not a *BatchError", name, err, err)
		case res != nil:
			t.Fatalf("%s: both a result and an error", name)
		case be.Kind != BatchInvalid && be.Kind != BatchTooLarge:
			t.Fatalf("%s: BatchError kind %s, want invalid or too large", name, be.Kind)
		case be.Message == "":
			t.Fatalf("%s: BatchError without a message", name)
		}
		return
	}
	if res == nil {
		t.Fatalf("%s: neither a result nor an error", name)
	}
	if !json.Valid(body) {
		t.Fatalf("%s: a body that is not JSON was not refused", name)
	}
	var top map[string]json.RawMessage
	var events []json.RawMessage
	if json.Unmarshal(body, &top) != nil || json.Unmarshal(top["events"], &events) != nil {
		t.Fatalf("%s: a body without an events array was not refused", name)
	}
	n := len(events)
	if n < 1 || n > limits.MaxEvents {
		t.Fatalf("%s: a batch of %d events was not refused", name, n)
	}

	if !slices.IsSortedFunc(res.Errors, func(a, b FieldError) int { return a.Index - b.Index }) {
		t.Fatalf("%s: errors not sorted by index: %+v", name, res.Errors)
	}
	errored := map[int]bool{}
	for _, fe := range res.Errors {
		if fe.Index < 0 || fe.Index >= n {
			t.Fatalf("%s: error index %d outside a batch of %d", name, fe.Index, n)
		}
		if fe.Message == "" {
			t.Fatalf("%s: error without a message: %+v", name, fe)
		}
		errored[fe.Index] = true
	}
	if len(res.Accepted)+len(errored) != n {
		t.Fatalf("%s: %d events, but %d accepted and %d with errors", name, n, len(res.Accepted), len(errored))
	}
	if len(res.Quarantined) != len(errored) {
		t.Fatalf("%s: %d events with errors, %d quarantined", name, len(errored), len(res.Quarantined))
	}

	ids := acceptedIDs(t, res)
	for i, m := range res.Accepted {
		if !json.Valid(m.Value) {
			t.Fatalf("%s: accepted value %d is not JSON: %q", name, i, m.Value)
		}
		if len(m.Key) == 0 || ids[i] == "" {
			t.Fatalf("%s: accepted record %d has key %q, event ID %q", name, i, m.Key, ids[i])
		}
	}
	quarantined := map[int]bool{}
	for i, m := range res.Quarantined {
		if !json.Valid(m.Value) {
			t.Fatalf("%s: quarantined value %d is not JSON: %q", name, i, m.Value)
		}
		var rec struct {
			Index *int `json:"index"`
		}
		if err := json.Unmarshal(m.Value, &rec); err != nil || rec.Index == nil {
			t.Fatalf("%s: quarantined value %d has no index: %v", name, i, err)
		}
		if !errored[*rec.Index] || quarantined[*rec.Index] {
			t.Fatalf("%s: quarantined index %d is not an errored event, or is quarantined twice", name, *rec.Index)
		}
		quarantined[*rec.Index] = true
	}
}
