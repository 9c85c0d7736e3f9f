package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

const (
	schemaDir  = "../../../schemas/events"
	fixtureDir = schemaDir + "/testdata"
	schemaBase = "https://schemas.assistantcms.dev/events/"
)

var testMeta = event.Meta{
	AppID:          "app-1",
	OrganizationID: "org-1",
	ReceivedAt:     time.Date(2024, 5, 6, 7, 8, 9, 120_000_000, time.UTC),
	IDSeed:         "seed",
}

// schemaSet holds the compiled schemas of schemas/events.
type schemaSet struct {
	batch, event, requestResponse, envelope, quarantine *jsonschema.Schema
}

var compiledSchemas = sync.OnceValues(func() (*schemaSet, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.AssertContent()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.schema.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no schemas in %s", schemaDir)
	}
	for _, file := range files {
		doc, err := readJSON(file)
		if err != nil {
			return nil, err
		}
		obj, _ := doc.(map[string]any)
		id, _ := obj["$id"].(string)
		if want := schemaBase + filepath.Base(file); id != want {
			return nil, fmt.Errorf("%s: $id is %q, want %q", file, id, want)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	var s schemaSet
	for name, dst := range map[string]**jsonschema.Schema{
		"batch.schema.json":            &s.batch,
		"event.schema.json":            &s.event,
		"request_response.schema.json": &s.requestResponse,
		"envelope.schema.json":         &s.envelope,
		"quarantine.schema.json":       &s.quarantine,
	} {
		sch, err := c.Compile(schemaBase + name)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		*dst = sch
	}
	return &s, nil
})

func loadSchemas(t testing.TB) *schemaSet {
	t.Helper()
	s, err := compiledSchemas()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readJSON(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// validate checks raw JSON text against a schema; text that is not JSON,
// including text that is not UTF-8 (RFC 8259, section 8.1), is invalid.
func validate(s *jsonschema.Schema, data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not JSON: not UTF-8")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(inst)
}

type fixture struct {
	name      string
	data      []byte
	wantValid bool
}

// loadFixtures reads dir/valid/*.json and dir/invalid/*.json.
func loadFixtures(t testing.TB, dir string) []fixture {
	t.Helper()
	var out []fixture
	for _, sub := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no fixtures in %s", filepath.Join(dir, sub))
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fixture{
				name:      sub + "/" + strings.TrimSuffix(filepath.Base(file), ".json"),
				data:      data,
				wantValid: sub == "valid",
			})
		}
	}
	return out
}

func wrapEvent(ev []byte) []byte {
	return []byte(`{"events":[` + string(bytes.TrimSpace(ev)) + `]}`)
}

func verdict(valid bool) string {
	if valid {
		return "valid"
	}
	return "invalid"
}

// TestSchemaEventFixtures requires the event schema and the Go validator to
// agree on every event fixture, and both to match the fixture's folder.
func TestSchemaEventFixtures(t *testing.T) {
	s := loadSchemas(t)
	v := event.NewValidator(event.DefaultLimits())
	for _, f := range loadFixtures(t, fixtureDir) {
		t.Run(f.name, func(t *testing.T) {
			schemaErr := validate(s.event, f.data)
			schemaValid := schemaErr == nil

			res, err := v.ProcessBatch(wrapEvent(f.data), testMeta)
			if err != nil {
				t.Fatalf("ProcessBatch refused the batch holding the event: %v", err)
			}
			goValid := len(res.Accepted) == 1

			if schemaValid != goValid {
				t.Errorf("disagreement: schema says %s (%v); Go says %s (errors %+v)",
					verdict(schemaValid), schemaErr, verdict(goValid), res.Errors)
			}
			if schemaValid != f.wantValid {
				t.Errorf("schema says %s, fixture expects %s: %v", verdict(schemaValid), verdict(f.wantValid), schemaErr)
			}
			if goValid != f.wantValid {
				t.Errorf("Go validator says %s, fixture expects %s: errors %+v", verdict(goValid), verdict(f.wantValid), res.Errors)
			}

			if goValid {
				if len(res.Errors) != 0 || len(res.Quarantined) != 0 || len(res.Accepted) != 1 {
					t.Errorf("accepted event: got %d errors, %d quarantined, %d accepted; want 0, 0, 1",
						len(res.Errors), len(res.Quarantined), len(res.Accepted))
				}
				return
			}
			if len(res.Accepted) != 0 || len(res.Quarantined) != 1 {
				t.Errorf("refused event: got %d accepted, %d quarantined; want 0, 1",
					len(res.Accepted), len(res.Quarantined))
			}
			if len(res.Errors) == 0 {
				t.Fatal("refused event without a FieldError")
			}
			for _, fe := range res.Errors {
				// An empty field names the event as a whole (not an object, too large).
				wholeEvent := strings.HasPrefix(fe.Message, "event ")
				if fe.Index != 0 || (fe.Field == "") != wholeEvent || fe.Message == "" {
					t.Errorf("FieldError %+v: want index 0, a message, and a field unless the whole event is at fault", fe)
				}
			}
		})
	}
}

// TestSchemaRequestResponseFixtures checks the payload schema alone on the
// payloads of the REQUEST_RESPONSE fixtures it is meant to decide.
func TestSchemaRequestResponseFixtures(t *testing.T) {
	s := loadSchemas(t)
	for _, f := range loadFixtures(t, fixtureDir) {
		var ev map[string]json.RawMessage
		if json.Unmarshal(f.data, &ev) != nil || string(ev["name"]) != `"REQUEST_RESPONSE"` {
			continue
		}
		payload, ok := ev["payload"]
		if !ok || payload[0] != '{' {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			if err := validate(s.requestResponse, payload); (err == nil) != f.wantValid {
				t.Errorf("payload schema says %s, fixture expects %s: %v", verdict(err == nil), verdict(f.wantValid), err)
			}
		})
	}
}

func minimalEvents(n int) []byte {
	evs := slices.Repeat([]string{`{"type":"REQUEST","name":"LAUNCH_REQUEST"}`}, n)
	return []byte(`{"events":[` + strings.Join(evs, ",") + `]}`)
}

// TestSchemaBatchFixtures requires the batch schema and the Go validator to
// agree on whole bodies: valid means no batch error and no event error.
func TestSchemaBatchFixtures(t *testing.T) {
	s := loadSchemas(t)
	v := event.NewValidator(event.DefaultLimits())
	cases := loadFixtures(t, filepath.Join(fixtureDir, "batches"))
	cases = append(cases,
		fixture{"generated/max-events", minimalEvents(event.DefaultMaxEvents), true},
		fixture{"generated/whitespace-around-body", []byte(" \n\t{\"events\":[{\"type\":\"ERROR\",\"name\":\"E\"}]}\r\n "), true},
		fixture{"generated/too-many-events", minimalEvents(event.DefaultMaxEvents + 1), false},
		fixture{"generated/empty-body", []byte(""), false},
		fixture{"generated/not-json", []byte(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST"}`), false},
		fixture{"generated/trailing-text", []byte(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST"}]} x`), false},
		fixture{"generated/two-bodies", []byte(`{"events":[{"type":"REQUEST","name":"A"}]}{"events":[{"type":"REQUEST","name":"B"}]}`), false},
		fixture{"generated/number-body", []byte(`500`), false},
		fixture{"generated/invalid-utf8", []byte("{\"events\":[{\"type\":\"REQUEST\",\"name\":\"caf\xe9\"}]}"), false},
		fixture{"generated/raw-control-character", []byte("{\"events\":[{\"type\":\"REQUEST\",\"name\":\"a\x01b\"}]}"), false},
		fixture{"generated/raw-control-character-before-escape", []byte("{\"events\":[{\"type\":\"REQUEST\",\"name\":\"\x01\\n\"}]}"), false},
	)
	for _, f := range cases {
		t.Run(f.name, func(t *testing.T) {
			schemaErr := validate(s.batch, f.data)
			schemaValid := schemaErr == nil

			res, err := v.ProcessBatch(f.data, testMeta)
			var goDetail any
			goValid := err == nil && len(res.Errors) == 0
			switch {
			case err != nil:
				goDetail = err
				var be *event.BatchError
				if !errors.As(err, &be) {
					t.Errorf("error %T %v is not a *BatchError", err, err)
				} else if be.Kind != event.BatchInvalid && be.Kind != event.BatchTooLarge {
					t.Errorf("BatchError kind %s, want invalid or too large", be.Kind)
				}
				if res != nil {
					t.Errorf("ProcessBatch returned both a result and an error")
				}
			case res == nil:
				t.Fatal("ProcessBatch returned neither a result nor an error")
			default:
				goDetail = res.Errors
			}

			if schemaValid != goValid {
				t.Errorf("disagreement: schema says %s (%v); Go says %s (%v)",
					verdict(schemaValid), schemaErr, verdict(goValid), goDetail)
			}
			if schemaValid != f.wantValid {
				t.Errorf("schema says %s, fixture expects %s: %v", verdict(schemaValid), verdict(f.wantValid), schemaErr)
			}
			if goValid != f.wantValid {
				t.Errorf("Go validator says %s, fixture expects %s: %v", verdict(goValid), verdict(f.wantValid), goDetail)
			}
		})
	}
}

// decodeExact decodes JSON keeping numbers as written.
func decodeExact(t testing.TB, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %.200q: %v", data, err)
	}
	return v
}

// batchEvents splits a body into its raw events; ok is false when the body
// has no events array.
func batchEvents(body []byte) (evs []json.RawMessage, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, false
	}
	if json.Unmarshal(top["events"], &evs) != nil {
		return nil, false
	}
	return evs, true
}

// TestSchemaEnvelopes checks every Kafka value produced for the fixtures
// against envelope.schema.json and quarantine.schema.json, and the promises
// their descriptions make.
func TestSchemaEnvelopes(t *testing.T) {
	s := loadSchemas(t)
	v := event.NewValidator(event.DefaultLimits())

	type batch struct {
		name string
		body []byte
		meta event.Meta
	}
	var batches []batch
	for _, f := range loadFixtures(t, fixtureDir) {
		batches = append(batches, batch{"event/" + f.name, wrapEvent(f.data), testMeta})
	}
	for _, f := range loadFixtures(t, filepath.Join(fixtureDir, "batches")) {
		batches = append(batches, batch{"batch/" + f.name, f.data, testMeta})
	}
	mixed := []byte(`{"events":[
		{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s-1"},
		{"type":"REQUEST"},
		{"type":"ERROR","name":"E","eventId":"client-id-1"},
		42,
		{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":"{\"request\":{},\"response\":{}}"}
	]}`)
	for _, m := range []struct {
		name string
		at   time.Time
	}{
		{"whole-second", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"nanoseconds", time.Date(2024, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
		{"other-zone", time.Date(2024, 5, 6, 12, 38, 9, 123_456_789, time.FixedZone("IST", 5*3600+1800))},
	} {
		meta := testMeta
		meta.ReceivedAt = m.at
		batches = append(batches, batch{"received-at/" + m.name, mixed, meta})
	}

	for _, m := range []struct{ name, token, network string }{
		{"ipv4", "0123456789abcdef", "203.0.113.0/24"},
		{"ipv6", "fedcba9876543210", "2001:db8:1::/48"},
		{"token-only", "0123456789abcdef", ""},
	} {
		meta := testMeta
		meta.TokenID, meta.ClientNetwork = m.token, m.network
		batches = append(batches, batch{"sender/" + m.name, mixed, meta})
	}

	huge := `{"type":"ERROR","name":"HUGE","payload":"` + strings.Repeat("x", 300<<10) + `"}`
	batches = append(batches, batch{"generated/huge-event", wrapEvent([]byte(huge)), testMeta})

	for _, b := range batches {
		t.Run(b.name, func(t *testing.T) {
			res, err := v.ProcessBatch(b.body, b.meta)
			if err != nil {
				return
			}
			evs, ok := batchEvents(b.body)
			if !ok {
				t.Fatalf("ProcessBatch accepted a body without an events array")
			}
			wantAt := b.meta.ReceivedAt.UTC().Truncate(time.Millisecond)

			errored := map[int][]event.FieldError{}
			for _, fe := range res.Errors {
				errored[fe.Index] = append(errored[fe.Index], fe)
			}
			accepted := 0
			for i := range evs {
				if errored[i] == nil {
					accepted++
				}
			}
			if len(res.Accepted) != accepted || len(res.Quarantined) != len(errored) {
				t.Fatalf("%d events, %d with errors: got %d accepted, %d quarantined",
					len(evs), len(errored), len(res.Accepted), len(res.Quarantined))
			}

			n := 0
			for i, raw := range evs {
				if errored[i] != nil {
					continue
				}
				msg := res.Accepted[n]
				checkEnvelope(t, s, raw, msg, b.meta, wantAt)
				n++
			}
			for _, msg := range res.Quarantined {
				checkQuarantine(t, s, evs, errored, msg, b.meta, wantAt)
			}

			again, err := v.ProcessBatch(b.body, b.meta)
			if err != nil {
				t.Fatalf("retrying the same batch: %v", err)
			}
			if first, second := envelopeIDs(t, res), envelopeIDs(t, again); !reflect.DeepEqual(first, second) {
				t.Errorf("retrying the same batch changed the event IDs: %q then %q", first, second)
			}
		})
	}
}

func checkReceivedAt(t *testing.T, got any, want time.Time) {
	t.Helper()
	str, _ := got.(string)
	at, err := time.Parse(time.RFC3339Nano, str)
	if err != nil || !at.Equal(want) {
		t.Errorf("receivedAt %q, want %s", str, want.Format("2006-01-02T15:04:05.000Z07:00"))
	}
}

// envelopeIDs reads the event ID of each accepted record from its envelope.
func envelopeIDs(t *testing.T, res *event.Result) []string {
	t.Helper()
	ids := make([]string, len(res.Accepted))
	for i, m := range res.Accepted {
		var env struct {
			EventID string `json:"eventId"`
		}
		if err := json.Unmarshal(m.Value, &env); err != nil {
			t.Fatalf("envelope %d: %v", i, err)
		}
		ids[i] = env.EventID
	}
	return ids
}

func checkEnvelope(t *testing.T, s *schemaSet, raw json.RawMessage, msg event.Record, meta event.Meta, wantAt time.Time) {
	t.Helper()
	if !json.Valid(msg.Value) {
		t.Fatalf("envelope is not JSON: %.300q", msg.Value)
	}
	if err := validate(s.envelope, msg.Value); err != nil {
		t.Errorf("envelope %.300s does not match envelope.schema.json: %v", msg.Value, err)
	}
	env, _ := decodeExact(t, msg.Value).(map[string]any)
	sent, _ := decodeExact(t, raw).(map[string]any)
	got, _ := env["event"].(map[string]any)

	if env["appId"] != meta.AppID || env["organizationId"] != meta.OrganizationID {
		t.Errorf("envelope appId %v, organizationId %v; want %q, %q", env["appId"], env["organizationId"], meta.AppID, meta.OrganizationID)
	}
	checkReceivedAt(t, env["receivedAt"], wantAt)
	for _, f := range []struct{ name, want string }{{"tokenId", meta.TokenID}, {"clientNetwork", meta.ClientNetwork}} {
		if have, ok := env[f.name]; (f.want == "" && ok) || (f.want != "" && have != f.want) {
			t.Errorf("envelope %s %v, want %q (absent when empty)", f.name, have, f.want)
		}
	}
	eventID, _ := env["eventId"].(string)
	if eventID == "" {
		t.Errorf("envelope eventId %v, want a non-empty string", env["eventId"])
	}
	if id, ok := sent["eventId"].(string); ok && id != eventID {
		t.Errorf("event ID %q, want the client's %q", eventID, id)
	}
	if got["appId"] != meta.AppID {
		t.Errorf("event appId %v, want %q", got["appId"], meta.AppID)
	}

	for k, want := range sent {
		have, ok := got[k]
		if !ok {
			t.Errorf("field %q of the event was dropped", k)
			continue
		}
		if str, isStr := want.(string); k == "payload" && isStr && sent["name"] == "REQUEST_RESPONSE" {
			d := json.NewDecoder(strings.NewReader(str))
			d.UseNumber()
			if err := d.Decode(&want); err != nil {
				t.Errorf("accepted a REQUEST_RESPONSE payload string that is not JSON: %v", err)
				continue
			}
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("field %q changed: sent %v, envelope has %v", k, want, have)
		}
	}

	wantKey := fmt.Sprintf("%s/%s", meta.AppID, eventID)
	if sid, ok := sent["sessionId"].(string); ok && sid != "" {
		wantKey = fmt.Sprintf("%s/%s", meta.AppID, sid)
	}
	if string(msg.Key) != wantKey {
		t.Errorf("key %q, want %q", msg.Key, wantKey)
	}
}

func checkQuarantine(t *testing.T, s *schemaSet, evs []json.RawMessage, errored map[int][]event.FieldError, msg event.Record, meta event.Meta, wantAt time.Time) {
	t.Helper()
	if !json.Valid(msg.Value) {
		t.Fatalf("quarantine record is not JSON: %.300q", msg.Value)
	}
	if err := validate(s.quarantine, msg.Value); err != nil {
		t.Errorf("quarantine record %.300s does not match quarantine.schema.json: %v", msg.Value, err)
	}
	rec, _ := decodeExact(t, msg.Value).(map[string]any)
	if rec["appId"] != meta.AppID || rec["organizationId"] != meta.OrganizationID {
		t.Errorf("quarantine appId %v, organizationId %v; want %q, %q", rec["appId"], rec["organizationId"], meta.AppID, meta.OrganizationID)
	}
	checkReceivedAt(t, rec["receivedAt"], wantAt)
	if _, ok := rec["tokenId"]; ok {
		t.Errorf("quarantine record carries the sender: %v", rec["tokenId"])
	}
	num, _ := rec["index"].(json.Number)
	idx, err := strconv.Atoi(num.String())
	if err != nil || errored[idx] == nil {
		t.Fatalf("quarantine index %v is not an index with errors", rec["index"])
	}
	var wantErrs []any
	for _, fe := range errored[idx] {
		wantErrs = append(wantErrs, map[string]any{"field": fe.Field, "message": fe.Message})
	}
	var gotErrs []any
	list, _ := rec["errors"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		gotErrs = append(gotErrs, map[string]any{"field": m["field"], "message": m["message"]})
	}
	if !reflect.DeepEqual(gotErrs, wantErrs) {
		t.Errorf("quarantine errors %v, Result.Errors has %v", gotErrs, wantErrs)
	}
	if rec["truncated"] == true {
		if str, _ := rec["event"].(string); !strings.HasPrefix(string(evs[idx]), str) {
			t.Errorf("truncated event %.100q is not a prefix of the raw event", str)
		}
		return
	}
	if want := decodeExact(t, evs[idx]); !reflect.DeepEqual(rec["event"], want) {
		t.Errorf("quarantined event %v, sent %v", rec["event"], want)
	}
}

// schemaDoc reads one schema file as plain JSON.
func schemaDoc(t *testing.T, name string) map[string]any {
	t.Helper()
	doc, err := readJSON(filepath.Join(schemaDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return doc.(map[string]any)
}

// lookup follows a path of object keys.
func lookup(t *testing.T, doc map[string]any, path ...string) any {
	t.Helper()
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object before %q", strings.Join(path, "."), k)
		}
		cur = m[k]
	}
	return cur
}

func schemaInt(t *testing.T, doc map[string]any, path ...string) int {
	t.Helper()
	num, ok := lookup(t, doc, path...).(json.Number)
	if !ok {
		t.Fatalf("%s is not a number", strings.Join(path, "."))
	}
	n, err := strconv.Atoi(num.String())
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(path, "."), err)
	}
	return n
}

// TestSchemaLimits keeps the numbers in the schemas equal to the Go limits:
// the exported constants directly, and every string length by probing the
// Go validator at the boundary the schema states.
func TestSchemaLimits(t *testing.T) {
	s := loadSchemas(t)
	batchDoc := schemaDoc(t, "batch.schema.json")
	eventDoc := schemaDoc(t, "event.schema.json")

	if got := schemaInt(t, batchDoc, "properties", "events", "maxItems"); got != event.DefaultMaxEvents {
		t.Errorf("batch maxItems %d, DefaultMaxEvents %d", got, event.DefaultMaxEvents)
	}
	if got := schemaInt(t, batchDoc, "properties", "events", "minItems"); got != 1 {
		t.Errorf("batch minItems %d, want 1", got)
	}
	// Any type is admitted by default, so the schema must not list them.
	if typ := lookup(t, eventDoc, "properties", "type").(map[string]any); typ["enum"] != nil || len(event.DefaultLimits().Types) != 0 {
		t.Errorf("type enum %v, DefaultLimits().Types %q: by default any type is admitted", typ["enum"], event.DefaultLimits().Types)
	}
	desc, _ := eventDoc["description"].(string)
	if want := strconv.Itoa(event.DefaultMaxEventBytes) + " bytes"; !strings.Contains(desc, want) {
		t.Errorf("event description does not state the size limit %q", want)
	}

	v := event.NewValidator(event.DefaultLimits())
	probe := func(t *testing.T, field, value string) (schemaValid, goValid bool) {
		t.Helper()
		ev := map[string]any{"type": "REQUEST", "name": "LAUNCH_REQUEST", field: value}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		meta := testMeta
		if field == "appId" {
			meta.AppID = value
		}
		res, err := v.ProcessBatch(wrapEvent(data), meta)
		if err != nil {
			t.Fatalf("ProcessBatch: %v", err)
		}
		return validate(s.event, data) == nil, len(res.Accepted) == 1
	}
	props := lookup(t, eventDoc, "properties").(map[string]any)
	for _, field := range slices.Sorted(maps.Keys(props)) {
		prop := props[field].(map[string]any)
		if _, ok := prop["maxLength"]; !ok {
			continue
		}
		max := schemaInt(t, eventDoc, "properties", field, "maxLength")
		min := 0
		if _, ok := prop["minLength"]; ok {
			min = schemaInt(t, eventDoc, "properties", field, "minLength")
		}
		type boundary struct {
			name  string
			value string
			valid bool
		}
		cases := []boundary{
			{"max-ascii", strings.Repeat("a", max), true},
			{"max-astral", strings.Repeat("\U0001F600", max), true},
			{"over-max-ascii", strings.Repeat("a", max+1), false},
			{"over-max-astral", strings.Repeat("\U0001F600", max+1), false},
			{"min", strings.Repeat("b", min), true},
		}
		if min > 0 {
			cases = append(cases, boundary{"under-min", strings.Repeat("b", min-1), false})
		}
		for _, c := range cases {
			t.Run(field+"/"+c.name, func(t *testing.T) {
				schemaValid, goValid := probe(t, field, c.value)
				if schemaValid != c.valid || goValid != c.valid {
					t.Errorf("%d code points: schema says %s, Go says %s, want %s",
						len([]rune(c.value)), verdict(schemaValid), verdict(goValid), verdict(c.valid))
				}
			})
		}
	}

	t.Run("event-bytes", func(t *testing.T) {
		// An event of exactly DefaultMaxEventBytes as stored passes;
		// one byte more is refused.
		head := `{"appId":"app-1","type":"AnalyticsEvent","name":"BIG","payload":"`
		tail := `"}`
		for _, c := range []struct {
			size  int
			valid bool
		}{
			{event.DefaultMaxEventBytes, true},
			{event.DefaultMaxEventBytes + 1, false},
		} {
			data := []byte(head + strings.Repeat("x", c.size-len(head)-len(tail)) + tail)
			res, err := v.ProcessBatch(wrapEvent(data), testMeta)
			if err != nil {
				t.Fatalf("%d bytes: ProcessBatch: %v", c.size, err)
			}
			if got := len(res.Accepted) == 1; got != c.valid {
				t.Errorf("%d-byte event: Go says %s, want %s", c.size, verdict(got), verdict(c.valid))
			}
		}
	})
}
