package livetail

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecode(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	for _, tc := range []struct {
		name        string
		value       string
		quarantined bool
		payload     int
		want        Event
	}{
		{
			name: "stored",
			value: `{"v":1,"eventId":"e1","appId":"a","organizationId":"o","receivedAt":"2026-05-06T07:08:09.120Z","tokenId":"0123456789abcdef",` +
				`"event":{"appId":"a","type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s","userId":"u","channel":"web","platform":"p",` +
				`"selectedHandler":"H","isoTime":"2026-05-06T07:08:00Z","payload":{"x":[1, 2]},"extra":{"deep":[{"type":"not this"}]}}}`,
			payload: 100,
			want: Event{EventID: "e1", Status: StatusStored, Type: "REQUEST", Name: "LAUNCH_REQUEST", SessionID: "s", UserID: "u",
				Channel: "web", Platform: "p", SelectedHandler: "H", ReceivedAt: "2026-05-06T07:08:09.120Z", RuntimeTime: "2026-05-06T07:08:00Z",
				Payload: json.RawMessage(`{"x":[1, 2]}`), Partition: 3, Offset: 42},
		},
		{
			name: "quarantined, with its reasons and fields of the wrong type",
			value: `{"v":1,"appId":"a","organizationId":"o","receivedAt":"2026-05-06T07:08:09.120Z","index":2,"eventId":"e2",` +
				`"errors":[{"field":"sessionId","reason":"wrong_type","message":"must be a string or null, got number"},{"field":"name","reason":"missing","message":"required"}],` +
				`"event":{"type":"REQUEST","sessionId":5,"userId":null,"channel":{"a":1}}}`,
			quarantined: true, payload: 100,
			want: Event{EventID: "e2", Status: StatusQuarantined, Type: "REQUEST", SessionID: "5", Channel: `{"a":1}`,
				ReceivedAt: "2026-05-06T07:08:09.120Z", Partition: 3, Offset: 42, Reasons: []Reason{
					{Field: "sessionId", Reason: "wrong_type", Message: "must be a string or null, got number"},
					{Field: "name", Reason: "missing", Message: "required"}}},
		},
		{
			name:        "quarantined, not an object",
			value:       `{"v":1,"appId":"a","receivedAt":"t","eventId":"e3","errors":[{"field":"","reason":"not_object","message":"m"}],"event":[1,"two"]}`,
			quarantined: true, payload: 100,
			want: Event{EventID: "e3", Status: StatusQuarantined, ReceivedAt: "t", Partition: 3, Offset: 42,
				Reasons: []Reason{{Field: "", Reason: "not_object", Message: "m"}}, Sent: json.RawMessage(`[1,"two"]`)},
		},
		{
			name:        "quarantined, kept in part",
			value:       `{"v":1,"appId":"a","receivedAt":"t","eventId":"e4","errors":[],"event":"{\"type\":\"REQ","truncated":true,"size":9000000}`,
			quarantined: true, payload: 100,
			want: Event{EventID: "e4", Status: StatusQuarantined, ReceivedAt: "t", Partition: 3, Offset: 42, Reasons: []Reason{},
				Sent: json.RawMessage(`"{\"type\":\"REQ"`), SentCut: true, SentBytes: 9000000},
		},
		{
			name:    "payload cut on a character boundary",
			value:   `{"eventId":"e5","receivedAt":"t","event":{"type":"T","payload":"é€é"}}`,
			payload: 5, // `"é€` is 1+2+3 bytes: the cut falls inside €
			want: Event{EventID: "e5", Status: StatusStored, Type: "T", ReceivedAt: "t", Partition: 3, Offset: 42,
				Payload: json.RawMessage(`"\"é"`), PayloadCut: true, PayloadBytes: len(`"é€é"`)},
		},
		{
			name:    "long fields cut, escaped keys read",
			value:   `{"eventId":"e6","receivedAt":"t","event":{"typ\u0065":"` + long + `","name":"a\"b"}}`,
			payload: 100,
			want:    Event{EventID: "e6", Status: StatusStored, Type: long[:256] + "…", Name: `a"b`, ReceivedAt: "t", Partition: 3, Offset: 42},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := readRecord([]byte(tc.value), tc.quarantined, 3, 42, tc.payload)
			if !ok {
				t.Fatal("not decoded")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if !utf8.ValidString(got.Type) {
				t.Errorf("type %q is not UTF-8", got.Type)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("the event does not encode: %v", err)
			}
		})
	}
}

// readRecord opens value with a reader of its own and decodes it.
func readRecord(value []byte, quarantined bool, partition int, offset int64, payloadBytes int) (Event, bool) {
	r, ok := new(reader).open(value)
	if !ok {
		return Event{}, false
	}
	return decode(r, quarantined, partition, offset, payloadBytes)
}

// What the consumer would refuse, the live view does not show either:
// not JSON, not an object, no event, or a member twice.
func TestDecodeRefusesWhatIsNoRecord(t *testing.T) {
	for _, v := range []string{``, `null`, `[]`, `{"eventId":"x"}`, `{"event":`, `{"event":{"type":"T"`, `{"event":{"type" "T"}}`,
		`{"event":{"a":"\"}}`, `{"event":{}} trailing`, `{"errors":"no","event":{}}`,
		`{"eventId":"a","eventId":"b","event":{}}`, `{"event":{"type":"A","type":"B"}}`} {
		if ev, ok := readRecord([]byte(v), true, 0, 0, 100); ok {
			t.Errorf("%q decoded as %+v", v, ev)
		}
	}
}

func TestAppOfKey(t *testing.T) {
	for _, tc := range []struct {
		key         string
		quarantined bool
		want        string
	}{
		{"app/session", false, "app"},
		{"app/sess/ion", false, "app"},
		{"app", false, "app"},
		{"app", true, "app"},
		{"", false, ""},
	} {
		if got := string(appOfKey([]byte(tc.key), tc.quarantined)); got != tc.want {
			t.Errorf("appOfKey(%q, %v) = %q, want %q", tc.key, tc.quarantined, got, tc.want)
		}
	}
}

// FuzzDecode: whatever a topic holds, decoding neither panics nor shows
// more of a payload than its bound, and what it shows as text is UTF-8.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"eventId":"e","receivedAt":"t","event":{"type":"T","payload":{"a":"` + strings.Repeat("x", 200) + `"}}}`,
		`{"eventId":"e","errors":[{"field":"f","reason":"r","message":"m"}],"event":"abc","truncated":true,"size":12}`,
		`{"event":[1,2,3]}`, `{"event":{"sessionId":{"deep":[{}]}}}`, `{"event":{"name":"\u00e9\ud83d\ude00"}}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, quarantined bool) {
		ev, ok := readRecord(b, quarantined, 0, 0, 64)
		if !ok {
			return
		}
		for _, s := range []string{ev.EventID, ev.Type, ev.Name, ev.SessionID, ev.UserID, ev.Channel, ev.Platform, ev.SelectedHandler, ev.RuntimeTime} {
			if len(s) > MaxFieldBytes+len("…") {
				t.Fatalf("a field of %d bytes, over %d", len(s), MaxFieldBytes)
			}
		}
		if ev.PayloadCut && len(ev.Payload) > 64*6+2 {
			t.Fatalf("a cut payload of %d bytes", len(ev.Payload))
		}
		if !ev.PayloadCut && len(ev.Payload) > 64 {
			t.Fatalf("a whole payload of %d bytes, over 64", len(ev.Payload))
		}
	})
}
