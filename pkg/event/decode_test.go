package event

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeRoundTrip(t *testing.T) {
	v := NewValidator(Limits{})
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
	var got []Decoded
	for _, m := range res.Accepted {
		row, err := d.Decode(m.Value)
		if err != nil {
			t.Fatalf("%v\n%s", err, m.Value)
		}
		got = append(got, row)
	}
	l := got[0]
	if l.EventID != res.EventIDs[0] || l.AppID != "app-1" || l.OrganizationID != "org-1" || l.Type != "REQUEST" || l.Name != "LAUNCH_REQUEST" ||
		l.SessionID != "s1" || l.UserID != "u1" || l.Channel != "web" || l.Platform != "stentor" || l.SelectedHandler != "Launch" ||
		l.CurrentHandler != "Launch" || l.Environment != "prod" {
		t.Errorf("launch row %+v", l)
	}
	if !l.ReceivedAt.Equal(testMeta.ReceivedAt) || !l.EventTime.Equal(time.Date(2026, 11, 20, 8, 30, 0, 250e6, time.UTC)) {
		t.Errorf("times %v %v", l.ReceivedAt, l.EventTime)
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
	if p.DisplayText != "Plain." || p.MatchConfidence != nil || !p.EventTime.Equal(p.ReceivedAt) {
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
		if _, err := d.Decode([]byte(in)); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: err = %v, want ErrEnvelope", name, err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	res, err := NewValidator(Limits{}).ProcessBatch(benchBody(50), testMeta)
	if err != nil {
		b.Fatal(err)
	}
	var d Decoder
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range res.Accepted {
			if _, err := d.Decode(m.Value); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*50), "ns/row")
}
