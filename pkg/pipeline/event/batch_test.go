package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/assistantcms/cms/internal/eventfixture"
	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

var testMeta = Meta{AppID: "app-1", OrganizationID: "org-1", ReceivedAt: time.Date(2026, 11, 21, 10, 0, 0, 123e6, time.UTC), IDSeed: "seed"}

func TestProcessBatchBatchErrors(t *testing.T) {
	v := NewValidator(Limits{MaxEvents: 3})
	cases := []struct {
		name, body   string
		kind         BatchErrorKind
		field, inMsg string
	}{
		{"empty body", ``, BatchInvalid, "", "body is empty"},
		{"not json", `{"events":[`, BatchInvalid, "", "not valid JSON"},
		{"NaN", `{"events":[{"type":"REQUEST","name":"x","n":NaN}]}`, BatchInvalid, "", "not valid JSON"},
		{"trailing garbage", `{"events":[]} x`, BatchInvalid, "", "not valid JSON"},
		{"control char", "{\"events\":[{\"type\":\"REQUEST\",\"name\":\"a\x01\"}]}", BatchInvalid, "", "not valid JSON"},
		{"invalid utf8", "{\"events\":[{\"type\":\"REQUEST\",\"name\":\"\xff\"}]}", BatchInvalid, "", "UTF-8"},
		{"array body", `[]`, BatchInvalid, "", "got array"},
		{"missing events", `{"event":[]}`, BatchInvalid, "events", "is required"},
		{"events object", `{"events":{}}`, BatchInvalid, "events", "must be an array, got object"},
		{"events null", `{"events":null}`, BatchInvalid, "events", "got null"},
		{"empty events", `{"events":[]}`, BatchInvalid, "events", "at least 1"},
		{"duplicate events", `{"events":[{}],"events":[{}]}`, BatchInvalid, "events", "more than once"},
		{"too many", `{"events":[{},{},{},{}]}`, BatchTooLarge, "events", "holds 4 events; at most 3"},
		{"deep nesting", `{"events":[` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `]}`, BatchInvalid, "", "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.ProcessBatch([]byte(tc.body), testMeta)
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v (%T), want *BatchError", err, err)
			}
			if be.Kind != tc.kind || be.Field != tc.field || !strings.Contains(be.Message, tc.inMsg) {
				t.Errorf("got %s %q %q, want %s %q containing %q", be.Kind, be.Field, be.Message, tc.kind, tc.field, tc.inMsg)
			}
		})
	}
}

func rr(payload string) string {
	return `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","channel":"web","platform":"stentor","sessionId":"s1","payload":` + payload + `}`
}

func TestProcessBatchEventErrors(t *testing.T) {
	v := NewValidator(Limits{})
	long := strings.Repeat("é", 257)
	cases := []struct {
		name, event  string
		field, inMsg string
		reason       string
	}{
		{"not object", `42`, "", "must be a JSON object, got number", ReasonNotObject},
		{"missing type", `{"name":"x"}`, "type", "is required", ReasonMissing},
		{"empty type", `{"type":"","name":"x"}`, "type", "must not be empty", ReasonInvalid},
		{"long type", `{"type":"` + strings.Repeat("t", 129) + `","name":"x"}`, "type", "at most 128 characters, got 129", ReasonTooLong},
		{"type number", `{"type":1,"name":"x"}`, "type", "must be a string, got number", ReasonWrongType},
		{"missing name", `{"type":"REQUEST"}`, "name", "is required", ReasonMissing},
		{"name null", `{"type":"REQUEST","name":null}`, "name", "must be a string, got null", ReasonWrongType},
		{"long name", `{"type":"REQUEST","name":"` + long + `"}`, "name", "at most 256 characters, got 257", ReasonTooLong},
		{"foreign app", `{"type":"REQUEST","name":"x","appId":"app-2"}`, "appId", `token's app "app-1", got "app-2"`, ReasonAppMismatch},
		{"empty app", `{"type":"REQUEST","name":"x","appId":""}`, "appId", "must not be empty", ReasonInvalid},
		{"session number", `{"type":"REQUEST","name":"x","sessionId":5}`, "sessionId", "string or null, got number", ReasonWrongType},
		{"channel object", `{"type":"REQUEST","name":"x","channel":{}}`, "channel", "got object", ReasonWrongType},
		{"duplicate type", `{"type":"REQUEST","name":"x","type":"ERROR"}`, "type", "more than once", ReasonDuplicateKey},
		{"eventId null", `{"type":"REQUEST","name":"x","eventId":null}`, "eventId", "must be a string, got null", ReasonWrongType},
		{"rr no payload", `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE"}`, "payload", "is required", ReasonMissing},
		{"rr payload number", rr(`3`), "payload", "got number", ReasonWrongType},
		{"rr payload bad string", rr(`"{nope"`), "payload", "not valid JSON", ReasonInvalid},
		{"rr payload string array", rr(`"[1]"`), "payload", "string holding array", ReasonWrongType},
		{"rr no request", rr(`{"response":{}}`), "payload.request", "is required", ReasonMissing},
		{"rr response array", rr(`{"request":{},"response":[]}`), "payload.response", "must be an object, got array", ReasonWrongType},
		{"rr confidence string", rr(`{"request":{"matchConfidence":"0.9"},"response":{}}`), "payload.request.matchConfidence", "number or null, got string", ReasonWrongType},
		{"rr intent number", rr(`{"request":{"intentId":7},"response":{}}`), "payload.request.intentId", "got number", ReasonWrongType},
		{"rr tag number", rr(`{"request":{},"response":{},"tag":1}`), "payload.tag", "got number", ReasonWrongType},
		{"rr tag array of numbers", rr(`{"request":{},"response":{},"tag":["a",1]}`), "payload.tag[1]", "must be a string, got number", ReasonWrongType},
		{"rr displayText number", rr(`{"request":{},"response":{"outputSpeech":{"displayText":1}}}`), "payload.response.outputSpeech.displayText", "got number", ReasonWrongType},
		{"rr speech number", rr(`{"request":{},"response":{"reprompt":1}}`), "payload.response.reprompt", "got number", ReasonWrongType},
		{"rr displays object", rr(`{"request":{},"response":{"displays":{}}}`), "payload.response.displays", "array or null", ReasonWrongType},
		{"rr item title", rr(`{"request":{},"response":{"displays":[{"type":"LIST","items":[{"title":"a"},{"title":2}]}]}}`), "payload.response.displays[0].items[1].title", "got number", ReasonWrongType},
		{"rr items string", rr(`{"request":{},"response":{"displays":[{"items":"x"}]}}`), "payload.response.displays[0].items", "got string", ReasonWrongType},
		{"rr in string bad", rr(`"{\"request\":{\"matchConfidence\":true},\"response\":{}}"`), "payload.request.matchConfidence", "got boolean", ReasonWrongType},
		{"rr confidence beyond float32", rr(`{"request":{"matchConfidence":3.5e38},"response":{}}`), "payload.request.matchConfidence", `32-bit float can hold (magnitude at most 3.4028235e38), got "3.5e38"`, ReasonInvalid},
		{"rr confidence of 39 digits", rr(`{"request":{"matchConfidence":-` + strings.Repeat("9", 39) + `},"response":{}}`), "payload.request.matchConfidence", "32-bit float", ReasonInvalid},
		{"rr confidence in string beyond float32", rr(`"{\"request\":{\"matchConfidence\":1e39},\"response\":{}}"`), "payload.request.matchConfidence", `got "1e39"`, ReasonInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST"},` + tc.event + `]}`
			res, err := v.ProcessBatch([]byte(body), testMeta)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Accepted) != 1 || len(res.Quarantined) != 1 {
				t.Fatalf("accepted %d quarantined %d, want 1 and 1", len(res.Accepted), len(res.Quarantined))
			}
			if len(res.Errors) == 0 {
				t.Fatal("no errors")
			}
			e := res.Errors[0]
			if e.Index != 1 || e.Field != tc.field || e.Reason != tc.reason || !strings.Contains(e.Message, tc.inMsg) {
				t.Errorf("got %+v, want index 1 field %q reason %q message containing %q", e, tc.field, tc.reason, tc.inMsg)
			}
			var q struct {
				V      int
				Index  int
				AppID  string
				Errors []struct{ Field, Reason, Message string }
				Event  json.RawMessage
			}
			if err := json.Unmarshal(res.Quarantined[0].Value, &q); err != nil {
				t.Fatalf("quarantine record is not JSON: %v\n%s", err, res.Quarantined[0].Value)
			}
			if q.V != 1 || q.Index != 1 || q.AppID != "app-1" || len(q.Errors) == 0 || q.Errors[0].Field != tc.field || q.Errors[0].Reason != tc.reason {
				t.Errorf("quarantine record %s", res.Quarantined[0].Value)
			}
			if !jsonEqual(t, q.Event, []byte(tc.event)) {
				t.Errorf("quarantined event %s, want %s", q.Event, tc.event)
			}
		})
	}
}

// TestMatchConfidenceWithinFloat32 accepts every number a 32-bit float
// holds, however written, and refuses those beyond, which the consumer
// could not store.
func TestMatchConfidenceWithinFloat32(t *testing.T) {
	v := NewValidator(Limits{})
	for _, c := range []struct {
		num string
		ok  bool
	}{
		{"0.93", true}, {"-0", true}, {"1e-400", true}, {"99999999999999999999999", true},
		{"3.4028234e38", true}, {strings.Repeat("9", 38), true}, {"0." + strings.Repeat("9", 60), true},
		{"3.5e38", false}, {"1e400", false}, {"-1e400", false}, {strings.Repeat("9", 39), false},
	} {
		body := `{"events":[` + rr(`{"request":{"matchConfidence":`+c.num+`},"response":{}}`) + `]}`
		res, err := v.ProcessBatch([]byte(body), testMeta)
		if err != nil {
			t.Fatalf("%s: %v", c.num, err)
		}
		if got := len(res.Accepted) == 1; got != c.ok {
			t.Errorf("matchConfidence %s: accepted %v, want %v (%v)", c.num, got, c.ok, res.Errors)
		}
	}
}

// TestErrorsNameTheEvent checks that a fault in the body names its offset
// and, when it lies inside an event, that event's index.
func TestErrorsNameTheEvent(t *testing.T) {
	v := NewValidator(Limits{})
	at := func(body, s string) int { return strings.Index(body, s) }
	deep := `{"events":[{"type":"REQUEST","name":"x","p":` + strings.Repeat("[", 1000) + `}]}`
	cases := []struct {
		body string
		want string
	}{
		{`{"events":[{},{"a":tru}]}`, "body is not valid JSON: invalid literal at offset %d (in events[1])"},
		{`{"events":[{} x]}`, "body is not valid JSON: expected , or ] after an array element, found 'x' at offset %d"},
		{`{"events":[1,NaN]}`, "body is not valid JSON: NaN is not a JSON number at offset %d (in events[1])"},
		{`{"events":[{"n":-Infinity}]}`, "body is not valid JSON: -Infinity is not a JSON number at offset %d (in events[0])"},
		{`{"events":[{}],"x":Infinity}`, "body is not valid JSON: Infinity is not a JSON number at offset %d"},
		{`{"events":[{"a":"` + "\xff" + `"}]}`, "body is not valid UTF-8: byte 0xff at offset %d (in events[0])"},
		{`{"x":"` + "\xc0\xaf" + `","events":[{}]}`, "body is not valid UTF-8: byte 0xc0 at offset %d"},
		{deep, "body is not valid JSON: arrays and objects nest deeper than 128 levels at offset %d (in events[0])"},
	}
	marks := []string{"tru", " x", "NaN", "-Inf", "Inf", "\xff", "\xc0", ""}
	for i, c := range cases {
		off := at(c.body, marks[i])
		if c.body == deep {
			off = at(deep, "[[") + 125 // three levels are the root, events and the event
		}
		want := fmt.Sprintf(c.want, off)
		if marks[i] == " x" {
			want = fmt.Sprintf(c.want, off+1)
		}
		_, err := v.ProcessBatch([]byte(c.body), testMeta)
		if err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", c.body, err, want)
		}
	}
}

// TestEventErrorsAreCapped lists at most maxEventErrors problems of one
// event and says there were more, so that neither the answer nor the
// quarantine record grows with the number of faults.
func TestEventErrorsAreCapped(t *testing.T) {
	v := NewValidator(Limits{})
	items := strings.TrimSuffix(strings.Repeat(`{"title":1,"token":2},`, 5000), ",")
	body := `{"events":[` + rr(`{"request":{},"response":{"displays":[{"items":[`+items+`]}]}}`) + `,{"type":"X","name":7}]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	var first []FieldError
	for _, e := range res.Errors {
		if e.Index == 0 {
			first = append(first, e)
		}
	}
	if len(first) != maxEventErrors+1 {
		t.Fatalf("%d errors listed for the event, want %d", len(first), maxEventErrors+1)
	}
	if e := first[1]; e.Field != "payload.response.displays[0].items[0].token" {
		t.Errorf("second error %+v", e)
	}
	if last := first[maxEventErrors]; last.Field != "" || last.Reason != ReasonMoreErrors || !strings.Contains(last.Message, "more problems; only the first 20 are listed") {
		t.Errorf("last error %+v", last)
	}
	if n := len(res.Errors) - len(first); n != 1 || res.Errors[len(res.Errors)-1].Index != 1 {
		t.Errorf("the next event's errors: %v", res.Errors[len(first):])
	}
	var q struct{ Errors []FieldError }
	if err := json.Unmarshal(res.Quarantined[0].Value, &q); err != nil || len(q.Errors) != maxEventErrors+1 {
		t.Errorf("quarantine record lists %d errors (%v), want %d", len(q.Errors), err, maxEventErrors+1)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

type envelope struct {
	V              int             `json:"v"`
	EventID        string          `json:"eventId"`
	AppID          string          `json:"appId"`
	OrganizationID string          `json:"organizationId"`
	ReceivedAt     string          `json:"receivedAt"`
	Event          json.RawMessage `json:"event"`
}

func TestProcessBatchEnvelope(t *testing.T) {
	v := NewValidator(Limits{})
	body := `{"events":[
	 {"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s1","userId":"u1","channel":"web","platform":"stentor","selectedHandler":"LaunchRequest","isNewSession":true,"custom":{"a":[1,2.5e3,null]}},
	 {"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","appId":"app-1","eventId":"client-id-1","sessionId":"s1","payload":"{\"request\":{\"type\":\"INTENT_REQUEST\",\"matchConfidence\":0.93},\"response\":{\"outputSpeech\":\"hi\"},\"tag\":\"t\"}"},
	 {"type":"ERROR","name":"oops","payload":{"message":"bad \u0001 \"q\" é","stack":[]}}
	]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 3 || len(res.Quarantined) != 0 || len(res.Errors) != 0 {
		t.Fatalf("got %d accepted, %d quarantined, errors %v", len(res.Accepted), len(res.Quarantined), res.Errors)
	}
	var envs [3]envelope
	var events [3]map[string]any
	for i, m := range res.Accepted {
		if err := json.Unmarshal(m.Value, &envs[i]); err != nil {
			t.Fatalf("envelope %d: %v\n%s", i, err, m.Value)
		}
		if err := json.Unmarshal(envs[i].Event, &events[i]); err != nil {
			t.Fatal(err)
		}
		if envs[i].V != 1 || envs[i].AppID != "app-1" || envs[i].OrganizationID != "org-1" || envs[i].ReceivedAt != "2026-11-21T10:00:00.123Z" {
			t.Errorf("envelope %d: %s", i, m.Value)
		}
		if events[i]["appId"] != "app-1" {
			t.Errorf("event %d appId = %v, want filled in", i, events[i]["appId"])
		}
	}
	if got := string(res.Accepted[0].Key); got != "app-1/s1" {
		t.Errorf("key 0 = %q", got)
	}
	if got := string(res.Accepted[2].Key); got != "app-1/"+envs[2].EventID {
		t.Errorf("key without session = %q", got)
	}
	if envs[1].EventID != "client-id-1" {
		t.Errorf("client event ID not kept: %q", envs[1].EventID)
	}
	if id := envs[0].EventID; len(id) != 36 || id[14] != '8' {
		t.Errorf("derived ID %q is not a version 8 UUID", id)
	}
	if events[0]["isNewSession"] != true || fmt.Sprint(events[0]["custom"]) != "map[a:[1 2500 <nil>]]" {
		t.Errorf("unknown fields not kept: %v", events[0])
	}
	p, ok := events[1]["payload"].(map[string]any)
	if !ok {
		t.Fatalf("string payload not normalised to an object: %T", events[1]["payload"])
	}
	if p["tag"] != "t" || p["request"].(map[string]any)["matchConfidence"] != 0.93 {
		t.Errorf("payload = %v", p)
	}
	msg := events[2]["payload"].(map[string]any)["message"]
	if msg != "bad \u0001 \"q\" é" {
		t.Errorf("escapes not preserved: %q", msg)
	}
}

// acceptedIDs reads the event ID of each accepted record from its envelope.
func acceptedIDs(t testing.TB, res *Result) []string {
	t.Helper()
	ids := make([]string, len(res.Accepted))
	for i, m := range res.Accepted {
		var env struct {
			EventID string `json:"eventId"`
		}
		if err := json.Unmarshal(m.Value, &env); err != nil {
			t.Fatalf("envelope %d: %v\n%s", i, err, m.Value)
		}
		ids[i] = env.EventID
	}
	return ids
}

func TestProcessBatchIDs(t *testing.T) {
	v := NewValidator(Limits{})
	body := []byte(`{"events":[{"type":"REQUEST","name":"a"},{"type":"REQUEST","name":"a"}]}`)
	ra, _ := v.ProcessBatch(body, testMeta)
	rb, _ := v.ProcessBatch(body, testMeta)
	a, b := acceptedIDs(t, ra), acceptedIDs(t, rb)
	if !slices.Equal(a, b) {
		t.Errorf("retry changed IDs: %v vs %v", a, b)
	}
	if a[0] == a[1] {
		t.Error("two events of one batch share an ID")
	}
	other := testMeta
	other.IDSeed = "other"
	c, _ := v.ProcessBatch(body, other)
	if acceptedIDs(t, c)[0] == a[0] {
		t.Error("another batch seed gave the same ID")
	}
	otherApp := testMeta
	otherApp.AppID = "app-2"
	d, _ := v.ProcessBatch(body, otherApp)
	if acceptedIDs(t, d)[0] == a[0] {
		t.Error("another app gave the same ID")
	}
}

func TestProcessBatchLimits(t *testing.T) {
	v := NewValidator(Limits{MaxEventBytes: 100, Types: []string{"REQUEST", "MessageEvent"}})
	body := `{"events":[{"type":"MessageEvent","name":"m"},{"type":"REQUEST","name":"x","pad":"` + strings.Repeat("a", 100) + `"},{"type":"ERROR","name":"e"}]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 1 || len(res.Errors) != 2 {
		t.Fatalf("accepted %d errors %v", len(res.Accepted), res.Errors)
	}
	if res.Errors[0].Index != 1 || !strings.Contains(res.Errors[0].Message, "at most 100 are allowed") {
		t.Errorf("size error = %+v", res.Errors[0])
	}
	if res.Errors[1].Index != 2 || !strings.Contains(res.Errors[1].Message, `"REQUEST", "MessageEvent"`) {
		t.Errorf("type error = %+v", res.Errors[1])
	}
}

func TestQuarantineKeepsEventsWhole(t *testing.T) {
	const maxRecord = 4096
	v := NewValidator(Limits{MaxEventBytes: 1000, MaxRecordBytes: maxRecord})
	cases := []struct {
		name      string
		pad       string
		truncated bool
	}{
		{"over the event limit, kept whole", strings.Repeat("x", 2000), false},
		{"fits a record", strings.Repeat("x", maxRecord-600), false},
		{"too large for a record", strings.Repeat("x", 3*maxRecord), true},
		{"escapes at the cut", strings.Repeat("\\u0001\\\"é", maxRecord), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := `{"type":"REQUEST","name":"n","pad":"` + c.pad + `"}`
			res, err := v.ProcessBatch([]byte(`{"events":[`+raw+`]}`), testMeta)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Quarantined) != 1 || res.Errors[0].Reason != ReasonTooLarge {
				t.Fatalf("quarantined %d, errors %+v", len(res.Quarantined), res.Errors)
			}
			rec := res.Quarantined[0].Value
			if len(rec) > maxRecord {
				t.Errorf("record is %d bytes, over %d", len(rec), maxRecord)
			}
			var q struct {
				Event     json.RawMessage
				Truncated bool
				Size      int
			}
			if err := json.Unmarshal(rec, &q); err != nil {
				t.Fatalf("record is not JSON: %v", err)
			}
			if q.Truncated != c.truncated {
				t.Fatalf("truncated = %v, want %v", q.Truncated, c.truncated)
			}
			if !c.truncated {
				if string(q.Event) != raw {
					t.Errorf("event not kept as sent: %.60s", q.Event)
				}
				return
			}
			var cut string
			if err := json.Unmarshal(q.Event, &cut); err != nil {
				t.Fatal(err)
			}
			if q.Size != len(raw) || !strings.HasPrefix(raw, cut) || len(cut) < maxRecord/8 {
				t.Errorf("size %d (want %d), cut of %d bytes is a prefix: %v", q.Size, len(raw), len(cut), strings.HasPrefix(raw, cut))
			}
		})
	}
}

func TestCutEscaped(t *testing.T) {
	for _, s := range []string{"plain text", "q\"b\\", "\n\x01é€😀", "bad\xffutf"} {
		full := len(jsonscan.AppendString(nil, []byte(s)))
		for room := 0; room <= full+1; room++ {
			cut := cutEscaped([]byte(s), room)
			if n := len(jsonscan.AppendString(nil, cut)); n > room && len(cut) > 0 {
				t.Errorf("%q in %d bytes: cut %q escapes to %d", s, room, cut, n)
			}
			if room >= full && string(cut) != s {
				t.Errorf("%q in %d bytes: cut to %q", s, room, cut)
			}
			if !utf8.Valid(cut) && utf8.ValidString(s) {
				t.Errorf("%q in %d bytes: cut %q splits a character", s, room, cut)
			}
		}
	}
}

func TestAnyTypeByDefault(t *testing.T) {
	v := NewValidator(DefaultLimits())
	body := `{"events":[` +
		`{"type":"REQUEST","name":"LAUNCH_REQUEST"},` +
		`{"type":"ERROR","name":"TypeError","payload":{"message":"m","stack":[]}},` +
		`{"type":"AnalyticsEvent","name":"CUSTOM"},` +
		`{"type":"MessageEvent","name":"INFO","payload":"hello"},` +
		`{"type":"LambdaSuccessEvent","name":"Lambda Finished"},` +
		`{"type":"LambdaErrorEvent","name":"Lambda Finished","payload":"boom"},` +
		`{"type":"SomethingNew","name":""},` +
		`{"type":"","name":"x"},` +
		`{"type":"` + strings.Repeat("t", 129) + `","name":"x"}]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 7 {
		t.Errorf("accepted %d of the 7 events of any type, errors %+v", len(res.Accepted), res.Errors)
	}
	want := []FieldError{
		{Index: 7, Field: "type", Reason: ReasonInvalid, Message: "must not be empty"},
		{Index: 8, Field: "type", Reason: ReasonTooLong, Message: "must be at most 128 characters, got 129"},
	}
	if !reflect.DeepEqual(res.Errors, want) {
		t.Errorf("errors = %+v, want %+v", res.Errors, want)
	}
}

func TestEventIDsFromMeta(t *testing.T) {
	v := NewValidator(DefaultLimits())
	meta := testMeta
	meta.EventIDs = []string{"kept-0", "", "kept-2"}
	body := `{"events":[{"type":"REQUEST","name":"a"},{"type":"REQUEST","name":"b"},{"type":"REQUEST","name":"c","eventId":"own"},{"name":"bad"}]}`
	res, err := v.ProcessBatch([]byte(body), meta)
	if err != nil {
		t.Fatal(err)
	}
	derived := string(deriveID(nil, &meta, 1))
	if got, want := acceptedIDs(t, res), []string{"kept-0", derived, "own"}; !slices.Equal(got, want) {
		t.Errorf("event IDs %q, want %q", got, want)
	}
	if !strings.Contains(string(res.Quarantined[0].Value), `"eventId":"`+string(deriveID(nil, &meta, 3))+`"`) {
		t.Errorf("quarantine record %s", res.Quarantined[0].Value)
	}
}

// benchBody is a batch of n REQUEST_RESPONSE events of about 1 KB each.
func benchBody(n int) []byte { return eventfixture.RequestResponses(n) }

func BenchmarkProcessBatch(b *testing.B) {
	v := NewValidator(Limits{})
	body := benchBody(50)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := v.ProcessBatch(body, testMeta)
		if err != nil || len(res.Accepted) != 50 {
			b.Fatal(err, res.Errors)
		}
		res.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*50), "ns/event")
}

func TestBenchBodyIsValid(t *testing.T) {
	res, err := NewValidator(Limits{}).ProcessBatch(benchBody(50), testMeta)
	if err != nil || len(res.Errors) != 0 {
		t.Fatal(err, res.Errors)
	}
	if n := len(benchBody(50)) / 50; n < 900 || n > 1200 {
		t.Errorf("bench events are %d bytes, want about 1 KB", n)
	}
	_ = http.StatusOK
}

func TestDeepNestingIsRefusedCheaply(t *testing.T) {
	v := NewValidator(Limits{})
	n := 5 << 20 / 2 // a 5 MiB body of brackets
	for _, body := range []string{
		`{"events":[` + strings.Repeat("[", n) + strings.Repeat("]", n) + `]}`,
		`{"events":[{"type":"REQUEST","name":"x","p":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat("}", 200) + `}]}`,
	} {
		_, err := v.ProcessBatch([]byte(body), testMeta)
		var be *BatchError
		if !errors.As(err, &be) || be.Kind != BatchInvalid || !strings.Contains(be.Message, "deeper than 128 levels") {
			t.Errorf("deep body: %v", err)
		}
	}
	// Brackets and escaped quotes inside strings do not count.
	body := `{"events":[{"type":"REQUEST","name":"x","note":"` + strings.Repeat(`[{\"`, 300) + `"}]}`
	if res, err := v.ProcessBatch([]byte(body), testMeta); err != nil || len(res.Accepted) != 1 {
		t.Errorf("brackets in a string: %v %v", err, res.Errors)
	}
}

func TestReleaseRecyclesBuffer(t *testing.T) {
	v := NewValidator(Limits{})
	body := benchBody(5)
	res, err := v.ProcessBatch(body, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	want := string(res.Accepted[4].Value)
	res.Release()
	if res.Accepted != nil || res.Quarantined != nil {
		t.Error("Release left records reachable")
	}
	res.Release() // a second call is harmless
	again, err := v.ProcessBatch(body, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(again.Accepted[4].Value); got != want {
		t.Errorf("records after reuse differ:\n%s\n%s", got, want)
	}
}

func TestEscapedKeysAndSplicedPayload(t *testing.T) {
	v := NewValidator(Limits{})
	// The root key and the event keys are written with escapes; the payload
	// is a string and the event has no appId, so both edits apply.
	body := `{"ev\u0065nts":[{"typ\u0065":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":" {\"request\":{},\"response\":{\"outputSpeech\":\"\u00e9\"}} ","x":[1]}]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil || len(res.Errors) != 0 {
		t.Fatalf("%v %v", err, res.Errors)
	}
	var env envelope
	if err := json.Unmarshal(res.Accepted[0].Value, &env); err != nil {
		t.Fatalf("%v\n%s", err, res.Accepted[0].Value)
	}
	var ev map[string]any
	if err := json.Unmarshal(env.Event, &ev); err != nil {
		t.Fatal(err)
	}
	p, ok := ev["payload"].(map[string]any)
	if !ok || ev["appId"] != "app-1" || fmt.Sprint(ev["x"]) != "[1]" || ev["type"] != "AnalyticsEvent" {
		t.Fatalf("event %s", env.Event)
	}
	if p["response"].(map[string]any)["outputSpeech"] != "é" {
		t.Errorf("payload %v", p)
	}

	// An escaped duplicate of a checked key is still a duplicate.
	dup := `{"events":[{"type":"REQUEST","name":"a","n\u0061me":"b"}]}`
	res, err = v.ProcessBatch([]byte(dup), testMeta)
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Field != "name" || !strings.Contains(res.Errors[0].Message, "more than once") {
		t.Errorf("escaped duplicate: %v %+v", err, res.Errors)
	}
	// Two events keys, one escaped, are refused like two plain ones.
	_, err = v.ProcessBatch([]byte(`{"events":[{}],"\u0065vents":[{}]}`), testMeta)
	var be *BatchError
	if !errors.As(err, &be) || !strings.Contains(be.Message, "more than once") {
		t.Errorf("escaped second events key: %v", err)
	}
}

// TestEventsPastTheIndexBoundAreChecked: a body of tiny values fills the
// scanner's record before its end; events past that point are still
// checked, read byte by byte.
func TestEventsPastTheIndexBoundAreChecked(t *testing.T) {
	bad := rr(`{"request":{"intentId":7},"response":{"displays":[{"items":[{"title":"ok"},{"token":[]}]}]}}`)
	body := []byte(`{"events":[{"type":"X","name":"pad","pad":[` + strings.Repeat("0,", 20000) + `0]},` +
		rr(`{"request":{},"response":{}}`) + `,` + bad + `]}`)
	var x jsonscan.Index
	if _, err := jsonscan.ScanLayout(body, "events", nil, &x); err != nil {
		t.Fatal(err)
	}
	if x.Complete() {
		t.Fatal("the record did not fill up; the test does not test the fallback")
	}
	res, err := NewValidator(Limits{}).ProcessBatch(body, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldError{
		{Index: 2, Field: "payload.request.intentId", Reason: ReasonWrongType, Message: "must be a string or null, got number"},
		{Index: 2, Field: "payload.response.displays[0].items[1].token", Reason: ReasonWrongType, Message: "must be a string or null, got array"},
	}
	if len(res.Accepted) != 2 || !slices.Equal(res.Errors, want) {
		t.Errorf("accepted %d, errors %+v; want 2 and %+v", len(res.Accepted), res.Errors, want)
	}
}
