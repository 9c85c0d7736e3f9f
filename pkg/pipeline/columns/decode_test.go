package columns

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/eventfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

var testMeta = event.Meta{AppID: "app-1", OrganizationID: "org-1", ReceivedAt: time.Date(2026, 11, 21, 10, 0, 0, 123e6, time.UTC), IDSeed: "seed"}

// benchBody is a batch of n REQUEST_RESPONSE events of about 1 KB each.
func benchBody(n int) []byte { return eventfixture.RequestResponses(n) }

// acceptedIDs reads the event ID of each accepted record from its envelope.
func acceptedIDs(t testing.TB, res *event.Result) []string {
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

// row is one row of a batch, gathered for comparisons.
type row struct {
	EventID, AppID, OrganizationID                     string
	ReceivedAt, EventTime                              time.Time
	EventTimeSource                                    int8
	Type, Name, SessionID, UserID, Channel, Platform   string
	SelectedHandler, CurrentHandler, Environment       string
	RequestType, IntentID, RawQuery, DisplayText, SSML string
	Tags                                               []string
	Tag                                                string
	MatchConfidence                                    *float32
	DisplayCount                                       uint16
	ErrorMessage, ErrorStack, Message                  string
	KBUsed                                             uint8
	KBDocuments, KBFAQs                                uint16
	Payload, Extra                                     string
}

func rowOf(b *chstore.EventBatch, i int) row {
	return row{EventID: b.EventID[i], AppID: b.AppID[i], OrganizationID: b.OrganizationID[i], ReceivedAt: b.ReceivedAt[i], EventTime: b.EventTime[i],
		EventTimeSource: b.EventTimeSource[i],
		Type:            b.Type[i], Name: b.Name[i], SessionID: b.SessionID[i], UserID: b.UserID[i], Channel: b.Channel[i], Platform: b.Platform[i],
		SelectedHandler: b.SelectedHandler[i], CurrentHandler: b.CurrentHandler[i], Environment: b.Environment[i],
		RequestType: b.RequestType[i], IntentID: b.IntentID[i], RawQuery: b.RawQuery[i], DisplayText: b.DisplayText[i], SSML: b.SSML[i],
		Tags: b.Tags[i], Tag: b.Tag[i], MatchConfidence: b.MatchConfidence[i], DisplayCount: b.DisplayCount[i],
		ErrorMessage: b.ErrorMessage[i], ErrorStack: b.ErrorStack[i], Message: b.Message[i],
		KBUsed: b.KBUsed[i], KBDocuments: b.KBDocuments[i], KBFAQs: b.KBFAQs[i], Payload: b.Payload[i], Extra: b.Extra[i]}
}

// decodeRow decodes one envelope into a batch of its own.
func decodeRow(d *Decoder, value []byte) (row, error) {
	var b chstore.EventBatch
	i, err := d.Decode(value, &b)
	if err != nil {
		if b.Len() != 0 {
			return row{}, errors.New("an envelope that did not decode added a row")
		}
		return row{}, err
	}
	return rowOf(&b, i), nil
}

func TestDecodeRoundTrip(t *testing.T) {
	v := event.NewValidator(event.Limits{})
	body := `{"events":[
	 {"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s1","userId":"u1","channel":"web","platform":"stentor","selectedHandler":"Launch","currentHandler":"Launch","environment":"prod","isoTime":"2026-11-20T08:30:00.250Z","isNewSession":true,"custom":{"a":[1,"x"]},"n\u00e9":"\u00e9"},
	 {"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","eventId":"e-2","sessionId":"s1","payload":"{\"request\":{\"type\":\"INTENT_REQUEST\",\"intentId\":\"OrderStatus\",\"rawQuery\":\"where is it\",\"matchConfidence\":0.875},\"response\":{\"outputSpeech\":{\"displayText\":\"Today.\",\"ssml\":\"<speak>Today.</speak>\"},\"displays\":[{\"items\":[]},{}]},\"tag\":\"orders\"}"},
	 {"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":{"request":{},"response":{"outputSpeech":"Plain."}},"isoTime":"not a time"},
	 {"type":"ERROR","name":"oops","environment":{"stage":2}}
	]}`
	res, err := v.ProcessBatch([]byte(body), testMeta)
	if err != nil || len(res.Errors) != 0 {
		t.Fatal(err, res.Errors)
	}
	var d Decoder
	var b chstore.EventBatch
	for _, m := range res.Accepted {
		if _, err := d.Decode(m.Value, &b); err != nil {
			t.Fatalf("%v\n%s", err, m.Value)
		}
	}
	var got []row
	for i := range b.Len() {
		got = append(got, rowOf(&b, i))
	}
	l := got[0]
	if l.EventID != acceptedIDs(t, res)[0] || l.AppID != "app-1" || l.OrganizationID != "org-1" || l.Type != "REQUEST" || l.Name != "LAUNCH_REQUEST" ||
		l.SessionID != "s1" || l.UserID != "u1" || l.Channel != "web" || l.Platform != "stentor" || l.SelectedHandler != "Launch" ||
		l.CurrentHandler != "Launch" || l.Environment != "prod" {
		t.Errorf("launch row %+v", l)
	}
	if !l.ReceivedAt.Equal(testMeta.ReceivedAt) || !l.EventTime.Equal(time.Date(2026, 11, 20, 8, 30, 0, 250e6, time.UTC)) ||
		l.EventTimeSource != chstore.TimeSourceRuntime {
		t.Errorf("times %v %v, source %d", l.ReceivedAt, l.EventTime, l.EventTimeSource)
	}
	if string(l.Extra) != `{"isNewSession":true,"custom":{"a":[1,"x"]},"n\u00e9":"\u00e9"}` || l.Payload != "" {
		t.Errorf("extra %s payload %s", l.Extra, l.Payload)
	}
	r := got[1]
	if r.EventID != "e-2" || r.RequestType != "INTENT_REQUEST" || r.IntentID != "OrderStatus" || r.RawQuery != "where is it" ||
		r.MatchConfidence == nil || *r.MatchConfidence != 0.875 || r.DisplayText != "Today." || r.SSML != "<speak>Today.</speak>" ||
		r.DisplayCount != 2 || r.Tag != "orders" || !strings.HasPrefix(r.Payload, `{"request"`) {
		t.Errorf("request-response row %+v", r)
	}
	p := got[2]
	if p.DisplayText != "Plain." || p.MatchConfidence != nil || !p.EventTime.Equal(p.ReceivedAt) || p.EventTimeSource != chstore.TimeSourceReceived {
		t.Errorf("plain speech row %+v", p)
	}
	if got[3].Environment != `{"stage":2}` {
		t.Errorf("unchecked field of another type: %q", got[3].Environment)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string]string{
		"not json":      `{"eventId":`,
		"array":         `[]`,
		"no event id":   `{"appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":{}}`,
		"id not string": `{"eventId":1,"appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":{}}`,
		"bad time":      `{"eventId":"e","appId":"a","receivedAt":"yesterday","event":{}}`,
		"event not obj": `{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":[]}`,
		"duplicate":     `{"eventId":"e","eventId":"f","appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":{}}`,
		"type not text": `{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":{"type":"x","name":"n","sessionId":"s","userId":"u","channel":"c","platform":"p","selectedHandler":"h","currentHandler":"h","environment":"e","appId":"a","x":{"y":"\u00zz"}}}`,
	}
	var d Decoder
	for name, in := range cases {
		if _, err := decodeRow(&d, []byte(in)); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", name, err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	// As ingest writes them: with the sender.
	meta := testMeta
	meta.TokenID, meta.ClientNetwork = "0123456789abcdef", "203.0.113.0/24"
	res, err := event.NewValidator(event.Limits{}).ProcessBatch(benchBody(50), meta)
	if err != nil {
		b.Fatal(err)
	}
	var d Decoder
	var rows chstore.EventBatch
	b.ReportAllocs()
	for b.Loop() {
		rows.Reset()
		for _, m := range res.Accepted {
			if _, err := d.Decode(m.Value, &rows); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*50), "ns/row")
}

// TestDecodeClientEvents decodes what one turn of the reference client
// sends: every type it defines fills its columns.
func TestDecodeClientEvents(t *testing.T) {
	kb := `"knowledgeBaseResult":{"documents":[{"document":"a"},{"document":"b"}],"suggested":[{"document":"c","topAnswer":"c"}],"faqs":[{"question":"q","document":"d"}]}`
	f32 := func(f float32) *float32 { return &f }
	cases := []struct {
		name, event string
		want        row
	}{
		{"launch request", `{"type":"REQUEST","name":"LAUNCH_REQUEST"}`,
			row{RequestType: "LAUNCH_REQUEST"}},
		{"intent request", `{"type":"REQUEST","name":"INTENT_REQUEST","payload":{"request":{"type":"INTENT_REQUEST","intentId":"FromRequest","rawQuery":"from request","matchConfidence":0.5,` + kb + `},"intent":"Order","slots":{},"matchConfidence":0.75,"rawQuery":"where is it"}}`,
			row{RequestType: "INTENT_REQUEST", IntentID: "Order", RawQuery: "where is it", MatchConfidence: f32(0.75), KBUsed: 1, KBDocuments: 3, KBFAQs: 1}},
		{"request fields fill what the payload leaves out", `{"type":"REQUEST","name":"INPUT_UNKNOWN_REQUEST","payload":{"request":{"type":"RAW_QUERY_REQUEST","intentId":"Unknown","rawQuery":"hm","matchConfidence":0.25}}}`,
			row{RequestType: "RAW_QUERY_REQUEST", IntentID: "Unknown", RawQuery: "hm", MatchConfidence: f32(0.25)}},
		{"session ended", `{"type":"REQUEST","name":"SESSION_ENDED_REQUEST","payload":{"reason":"USER_INITIATED","errorType":null}}`,
			row{RequestType: "SESSION_ENDED_REQUEST"}},
		{"request response, tag at the top", `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","tag":["a","b"],"payload":{"request":{"type":"INTENT_REQUEST","intentId":"Order",` + kb + `},"response":{"tag":["a","b"]},"tag":"ignored"}}`,
			row{RequestType: "INTENT_REQUEST", IntentID: "Order", Tags: []string{"a", "b"}, Tag: "a", KBUsed: 1, KBDocuments: 3, KBFAQs: 1}},
		{"request response, tag in the payload", `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":{"request":{},"response":{},"tag":"orders"}}`,
			row{Tags: []string{"orders"}, Tag: "orders"}},
		{"odd tags keep their text", `{"type":"AnalyticsEvent","name":"X","tag":["a",1,null,{"k":true}]}`,
			row{Tags: []string{"a", "1", `{"k":true}`}, Tag: "a"}},
		{"error", `{"type":"ERROR","name":"TypeError","payload":{"message":"boom","stack":[{"file":"index.js","lineNumber":3}]}}`,
			row{ErrorMessage: "boom", ErrorStack: `[{"file":"index.js","lineNumber":3}]`}},
		{"error with a string payload", `{"type":"ERROR","name":"Error","payload":"plain"}`,
			row{ErrorMessage: "plain", Message: "plain"}},
		{"message", `{"type":"MessageEvent","name":"INFO","payload":"looking it up"}`,
			row{Message: "looking it up"}},
		{"lambda success", `{"type":"LambdaSuccessEvent","name":"Lambda Finished"}`, row{}},
		{"lambda error", `{"type":"LambdaErrorEvent","name":"Lambda Finished","payload":"it failed"}`,
			row{ErrorMessage: "it failed", Message: "it failed"}},
		{"unknown type", `{"type":"Custom","name":"n","payload":{"message":"not an error"}}`, row{}},
	}
	v := event.NewValidator(event.DefaultLimits())
	var d Decoder
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := v.ProcessBatch([]byte(`{"events":[`+c.event+`]}`), testMeta)
			if err != nil || len(res.Accepted) != 1 {
				t.Fatalf("not accepted: %v %+v", err, res.Errors)
			}
			got, err := decodeRow(&d, res.Accepted[0].Value)
			if err != nil {
				t.Fatal(err)
			}
			// Compare the columns this test is about.
			w := c.want
			if got.RequestType != w.RequestType || got.IntentID != w.IntentID || got.RawQuery != w.RawQuery ||
				!slices.Equal(got.Tags, w.Tags) || got.Tag != w.Tag || got.ErrorMessage != w.ErrorMessage ||
				got.ErrorStack != w.ErrorStack || got.Message != w.Message || got.KBUsed != w.KBUsed ||
				got.KBDocuments != w.KBDocuments || got.KBFAQs != w.KBFAQs ||
				(got.MatchConfidence == nil) != (w.MatchConfidence == nil) ||
				(got.MatchConfidence != nil && *got.MatchConfidence != *w.MatchConfidence) {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
		})
	}
}

func TestDecodeQuarantine(t *testing.T) {
	v := event.NewValidator(event.Limits{MaxEventBytes: 200, MaxRecordBytes: 2000})
	big := strings.Repeat("x", 3000)
	body := `{"events":[{"type":"REQUEST","name":"ok"},{"type":"REQUEST","name":7,"sessionId":1},{"type":"REQUEST","name":"big","pad":"` + big + `"},42]}`
	meta := testMeta
	meta.EventIDs = []string{"", "given-1"} // as a resubmission gives them
	res, err := v.ProcessBatch([]byte(body), meta)
	if err != nil || len(res.Quarantined) != 3 {
		t.Fatalf("%v, %d quarantined", err, len(res.Quarantined))
	}
	var d Decoder
	var got []chstore.QuarantineRow
	for _, m := range res.Quarantined {
		q, err := d.DecodeQuarantine(m.Value)
		if err != nil {
			t.Fatalf("%v\n%s", err, m.Value)
		}
		got = append(got, q)
	}
	bad := got[0]
	if bad.AppID != "app-1" || bad.OrganizationID != "org-1" || !bad.ReceivedAt.Equal(testMeta.ReceivedAt) || bad.Index != 1 ||
		bad.EventID != "given-1" || bad.Reason != event.ReasonWrongType || bad.Field != "name" ||
		bad.Message != "must be a string, got number" || bad.Event != `{"type":"REQUEST","name":7,"sessionId":1}` ||
		bad.EventBytes != len(bad.Event) || bad.Truncated || !strings.Contains(bad.Errors, `"field":"sessionId"`) {
		t.Errorf("invalid event's row %+v", bad)
	}
	cut := got[1]
	if !cut.Truncated || cut.Reason != event.ReasonTooLarge || cut.EventBytes != len(big)+len(`{"type":"REQUEST","name":"big","pad":""}`) ||
		!strings.HasPrefix(cut.Event, `{"type":"REQUEST","name":"big","pad":"xxx`) || len(cut.Event) >= cut.EventBytes {
		t.Errorf("cut event's row: truncated %v reason %q bytes %d, event of %d bytes", cut.Truncated, cut.Reason, cut.EventBytes, len(cut.Event))
	}
	if got[2].Event != "42" || got[2].Reason != event.ReasonNotObject || got[2].Field != "" {
		t.Errorf("non-object's row %+v", got[2])
	}
	for name, in := range map[string]string{
		"no errors":   `{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","event":{}}`,
		"no event":    `{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","errors":[]}`,
		"bad index":   `{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","index":-1,"errors":[],"event":{}}`,
		"not an obj":  `"x"`,
		"no event id": `{"appId":"a","receivedAt":"2026-01-01T00:00:00Z","errors":[],"event":{}}`,
	} {
		if _, err := d.DecodeQuarantine([]byte(in)); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", name, err)
		}
	}
}

// TestDecodeBatchOfManyRows decodes more text than one of the batch's text
// blocks holds, twice into one batch reset in between, and checks that
// every row keeps its own values.
func TestDecodeBatchOfManyRows(t *testing.T) {
	v := event.NewValidator(event.DefaultLimits())
	pad := strings.Repeat("p", 2000)
	var values [][]byte
	for i := range 1500 { // about 3 MB of envelopes
		n := strconv.Itoa(i)
		res, err := v.ProcessBatch([]byte(`{"events":[{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","eventId":"e`+n+`","sessionId":"s`+n+
			`","payload":{"request":{"type":"INTENT_REQUEST","rawQuery":"q`+n+`","matchConfidence":0.`+n+`},"response":{"outputSpeech":"`+pad+`"},"tag":["t`+n+`","u"]}}]}`), testMeta)
		if err != nil || len(res.Accepted) != 1 {
			t.Fatal(err, res.Errors)
		}
		values = append(values, res.Accepted[0].Value)
	}
	var d Decoder
	var b chstore.EventBatch
	for round := range 2 {
		b.Reset()
		for _, value := range values {
			if _, err := d.Decode(value, &b); err != nil {
				t.Fatal(err)
			}
		}
		if b.Len() != len(values) {
			t.Fatalf("round %d: %d rows of %d envelopes", round, b.Len(), len(values))
		}
		for i := range values {
			n := strconv.Itoa(i)
			r := rowOf(&b, i)
			want, _ := strconv.ParseFloat("0."+n, 32)
			if r.EventID != "e"+n || r.SessionID != "s"+n || r.RawQuery != "q"+n || r.DisplayText != pad || r.Tag != "t"+n ||
				!slices.Equal(r.Tags, []string{"t" + n, "u"}) || r.MatchConfidence == nil || *r.MatchConfidence != float32(want) ||
				!strings.Contains(r.Payload, `"rawQuery":"q`+n+`"`) {
				t.Fatalf("round %d, row %d: %+v", round, i, r)
			}
		}
	}
}

// TestDecodeClampsEventTime checks which runtime times become event times:
// only those near the receipt, within the window; the runtime's time is
// kept whatever it is, and one no column holds is kept as sent in extra.
// An event dated 2099 is counted on the day it arrived.
func TestDecodeClampsEventTime(t *testing.T) {
	at := testMeta.ReceivedAt.UTC()
	iso := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	cases := []struct {
		name     string
		isoTime  string // the JSON value sent; "" sends none
		window   TimeWindow
		event    time.Time
		source   int8
		runtime  *time.Time
		extraIso string // what extra keeps of isoTime
	}{
		{"none", "", TimeWindow{}, at, chstore.TimeSourceReceived, nil, ""},
		{"now", `"` + iso(at) + `"`, TimeWindow{}, at, chstore.TimeSourceRuntime, &at, ""},
		{"an hour ago", `"` + iso(at.Add(-time.Hour)) + `"`, TimeWindow{}, at.Add(-time.Hour), chstore.TimeSourceRuntime, ptr(at.Add(-time.Hour)), ""},
		{"six days ago", `"` + iso(at.Add(-6*24*time.Hour)) + `"`, TimeWindow{}, at.Add(-6 * 24 * time.Hour), chstore.TimeSourceRuntime, ptr(at.Add(-6 * 24 * time.Hour)), ""},
		{"eight days ago", `"` + iso(at.Add(-8*24*time.Hour)) + `"`, TimeWindow{}, at, chstore.TimeSourceReceived, ptr(at.Add(-8 * 24 * time.Hour)), ""},
		{"a clock a minute ahead", `"` + iso(at.Add(time.Minute)) + `"`, TimeWindow{}, at.Add(time.Minute), chstore.TimeSourceRuntime, ptr(at.Add(time.Minute)), ""},
		{"ten minutes ahead", `"` + iso(at.Add(10*time.Minute)) + `"`, TimeWindow{}, at, chstore.TimeSourceReceived, ptr(at.Add(10 * time.Minute)), ""},
		{"2099", `"2099-06-01T00:00:00.000Z"`, TimeWindow{}, at, chstore.TimeSourceReceived, ptr(time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC)), ""},
		{"a wider window", `"` + iso(at.Add(-30*24*time.Hour)) + `"`, TimeWindow{MaxPast: 31 * 24 * time.Hour}, at.Add(-30 * 24 * time.Hour), chstore.TimeSourceRuntime, ptr(at.Add(-30 * 24 * time.Hour)), ""},
		{"a narrower window", `"` + iso(at.Add(time.Minute)) + `"`, TimeWindow{MaxFuture: time.Second}, at, chstore.TimeSourceReceived, ptr(at.Add(time.Minute)), ""},
		{"past what a column holds", `"9999-12-31T23:59:59Z"`, TimeWindow{}, at, chstore.TimeSourceReceived, nil, `"9999-12-31T23:59:59Z"`},
		{"before 1970", `"1969-12-31T23:59:59Z"`, TimeWindow{}, at, chstore.TimeSourceReceived, nil, `"1969-12-31T23:59:59Z"`},
		{"not a time", `"yesterday"`, TimeWindow{}, at, chstore.TimeSourceReceived, nil, `"yesterday"`},
		{"a number", `1764000000`, TimeWindow{}, at, chstore.TimeSourceReceived, nil, `1764000000`},
		{"null", `null`, TimeWindow{}, at, chstore.TimeSourceReceived, nil, ""},
	}
	v := event.NewValidator(event.DefaultLimits())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := `{"type":"REQUEST","name":"LAUNCH_REQUEST"`
			if c.isoTime != "" {
				ev += `,"isoTime":` + c.isoTime
			}
			res, err := v.ProcessBatch([]byte(`{"events":[`+ev+`}]}`), testMeta)
			if err != nil || len(res.Accepted) != 1 {
				t.Fatalf("not accepted: %v %+v", err, res.Errors)
			}
			d := Decoder{Times: c.window}
			var b chstore.EventBatch
			i, err := d.Decode(res.Accepted[0].Value, &b)
			if err != nil {
				t.Fatal(err)
			}
			if !b.EventTime[i].Equal(c.event) || b.EventTimeSource[i] != c.source {
				t.Errorf("event time %s (source %d), want %s (%d)", b.EventTime[i], b.EventTimeSource[i], c.event, c.source)
			}
			switch rt := b.RuntimeTime[i]; {
			case (rt == nil) != (c.runtime == nil):
				t.Errorf("runtime time %v, want %v", rt, c.runtime)
			case rt != nil && !rt.Equal(*c.runtime):
				t.Errorf("runtime time %s, want %s", rt, c.runtime)
			}
			wantExtra := "{}"
			if c.extraIso != "" {
				wantExtra = `{"isoTime":` + c.extraIso + `}`
			}
			if b.Extra[i] != wantExtra {
				t.Errorf("extra %s, want %s", b.Extra[i], wantExtra)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestDecodeSender reads who sent a batch from its envelopes, and decodes
// envelopes written before ingest recorded it.
func TestDecodeSender(t *testing.T) {
	v := event.NewValidator(event.DefaultLimits())
	meta := testMeta
	meta.TokenID, meta.ClientNetwork = "0123456789abcdef", "2001:db8:1::/48"
	res, err := v.ProcessBatch([]byte(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST"}]}`), meta)
	if err != nil || len(res.Accepted) != 1 {
		t.Fatal(err, res.Errors)
	}
	old := `{"v":1,"eventId":"e","appId":"a","organizationId":"o","receivedAt":"2026-01-01T00:00:00.000Z","event":{"type":"REQUEST"}}`
	var d Decoder
	var b chstore.EventBatch
	for _, c := range []struct {
		name, value, token, network string
	}{
		{"recorded", string(res.Accepted[0].Value), meta.TokenID, meta.ClientNetwork},
		{"older envelope", old, "", ""},
	} {
		i, err := d.Decode([]byte(c.value), &b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if b.TokenID[i] != c.token || b.ClientNetwork[i] != c.network {
			t.Errorf("%s: token %q network %q, want %q %q", c.name, b.TokenID[i], b.ClientNetwork[i], c.token, c.network)
		}
	}
	for _, bad := range []string{
		`{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","tokenId":7,"event":{}}`,
		`{"eventId":"e","appId":"a","receivedAt":"2026-01-01T00:00:00Z","clientNetwork":["x"],"event":{}}`,
	} {
		if _, err := decodeRow(&d, []byte(bad)); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", bad, err)
		}
	}
}
