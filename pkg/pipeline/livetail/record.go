package livetail

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

// Event is one event as the stream shows it: what ingest published to
// the events topic (stored) or to the quarantine topic, with its reasons.
// Strings are as sent, cut at MaxFieldBytes; a field sent with another
// JSON type than a string (which quarantines the event) shows as its JSON
// text.
type Event struct {
	EventID string `json:"eventId"`
	// Status is "stored" (the events topic) or "quarantined".
	Status          string `json:"status"`
	Type            string `json:"type,omitempty"`
	Name            string `json:"name,omitempty"`
	SessionID       string `json:"sessionId,omitempty"`
	UserID          string `json:"userId,omitempty"`
	Channel         string `json:"channel,omitempty"`
	Platform        string `json:"platform,omitempty"`
	SelectedHandler string `json:"selectedHandler,omitempty"`
	// ReceivedAt is when ingest received the batch (RFC 3339, UTC).
	ReceivedAt string `json:"receivedAt"`
	// RuntimeTime is the isoTime the runtime sent, as it sent it.
	RuntimeTime string `json:"runtimeTime,omitempty"`
	// Reasons are why a quarantined event was refused, each with the path
	// of its field.
	Reasons []Reason `json:"reasons,omitempty"`
	// Payload is the event's payload. When its JSON text is longer than
	// the stream's payload size, Payload is a string holding the first
	// bytes of that text, PayloadCut is true and PayloadBytes is the whole
	// text's length.
	Payload      json.RawMessage `json:"payload,omitempty"`
	PayloadCut   bool            `json:"payloadCut,omitempty"`
	PayloadBytes int             `json:"payloadBytes,omitempty"`
	// Sent is the event as sent when it is not a JSON object, or when the
	// quarantine record kept only its first bytes (SentBytes is then its
	// size); cut as Payload is.
	Sent      json.RawMessage `json:"sent,omitempty"`
	SentCut   bool            `json:"sentCut,omitempty"`
	SentBytes int             `json:"sentBytes,omitempty"`
	// Partition and Offset are where the record is in its topic.
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Reason is one of the reasons an event was quarantined.
type Reason struct {
	Field   string `json:"field"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Statuses of an Event.
const (
	StatusStored      = "stored"
	StatusQuarantined = "quarantined"
)

// MaxFieldBytes bounds each string field of an Event (a quarantined event
// may carry a name of a megabyte); a longer one is cut and ends with "…".
const MaxFieldBytes = 256

// fields are the parts of a record the filters read, as raw JSON values
// (strings with their quotes), found without decoding the record.
type fields struct {
	appID, eventID, typ, name, sessionID, userID []byte
}

// reader reads records with the consumer's JSON reader (package
// jsonscan): a record is checked once, whole, then walked, its members
// looked up as the consumer looks them up. Records come from ingest, but
// the topics are a shared resource and anything may be on them. A reader
// serves one record at a time.
type reader struct {
	index   jsonscan.Index
	scratch []byte
}

// record is one record's value as a reader opened it.
type record struct {
	w    jsonscan.Walker
	root []byte // the object, from its '{'
}

// open checks value; false when it is not a JSON object.
func (rd *reader) open(value []byte) (record, bool) {
	rd.scratch = rd.scratch[:0]
	w := jsonscan.Walker{Index: &rd.index, Scratch: &rd.scratch}
	if jsonscan.Check(value, &rd.index) != nil {
		return record{}, false
	}
	root := value[jsonscan.SkipWS(value, 0):]
	return record{w: w, root: root}, root[0] == '{'
}

// lookup finds keys in the object obj of the record as the consumer does
// (columns), filling vals; false when a key appears twice, which the
// consumer refuses too.
func (r record) lookup(obj []byte, keys []string, vals [][]byte) bool {
	return r.w.Fields(obj, keys, vals) == ""
}

// scanFields reads the fields of a record: an envelope of the events
// topic or a quarantine record. ok is false for a record that is not
// such a JSON object.
func scanFields(r record) (f fields, ok bool) {
	var top [3][]byte
	if !r.lookup(r.root, []string{"appId", "eventId", "event"}, top[:]) {
		return f, false
	}
	f.appID, f.eventID = top[0], top[1]
	if event := top[2]; len(event) == 0 || event[0] != '{' {
		return f, true
	}
	var ev [4][]byte
	ok = r.lookup(top[2], []string{"type", "name", "sessionId", "userId"}, ev[:])
	f.typ, f.name, f.sessionID, f.userID = ev[0], ev[1], ev[2], ev[3]
	return f, ok
}

// equals reports whether the raw JSON value v is the string s.
func equals(v []byte, s string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == s
	}
	var got string
	return json.Unmarshal(v, &got) == nil && got == s
}

// text is the raw JSON value v of the record shown as a string field: a string's value,
// nothing for null or absent, else the value's JSON text; cut at
// MaxFieldBytes.
func (r record) text(v []byte) string {
	var s string
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		s = string(r.w.String(v))
	default:
		s = string(v)
	}
	if len(s) <= MaxFieldBytes {
		return s
	}
	return string(cutUTF8([]byte(s), MaxFieldBytes)) + "…"
}

// cutUTF8 returns the longest prefix of b of at most n bytes that ends on
// a character boundary.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[:n]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.Valid(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// cut returns raw, a JSON value, whole when it fits in n bytes, else as a
// string of its first bytes, with whether it was cut and its length.
func cut(raw []byte, n int) (json.RawMessage, bool, int) {
	if len(raw) <= n {
		return raw, false, 0
	}
	s, _ := json.Marshal(string(cutUTF8(raw, n)))
	return s, true, len(raw)
}

// decode builds the Event of a record: a quarantine record when
// quarantined, else an envelope. payloadBytes bounds the payload shown.
// ok is false for a record that is neither.
func decode(r record, quarantined bool, partition int, offset int64, payloadBytes int) (Event, bool) {
	var top [6][]byte
	if !r.lookup(r.root, []string{"eventId", "receivedAt", "event", "errors", "truncated", "size"}, top[:]) || len(top[2]) == 0 {
		return Event{}, false
	}
	event, errs, truncated := top[2], top[3], string(top[4]) == "true"
	ev := Event{EventID: r.text(top[0]), Status: StatusStored, ReceivedAt: r.text(top[1]), Partition: partition, Offset: offset}
	if quarantined {
		ev.Status = StatusQuarantined
		if len(errs) > 0 && json.Unmarshal(errs, &ev.Reasons) != nil {
			return Event{}, false
		}
	}
	if event[0] != '{' || truncated {
		// Not an object, or kept in part: shown as sent, nothing to read in it.
		ev.Sent, ev.SentCut, ev.SentBytes = cut(event, payloadBytes)
		if truncated {
			ev.SentCut = true
			ev.SentBytes, _ = strconv.Atoi(string(top[5]))
		}
		return ev, true
	}
	var f [9][]byte
	if !r.lookup(event, []string{"type", "name", "sessionId", "userId", "channel", "platform", "selectedHandler", "isoTime", "payload"}, f[:]) {
		return Event{}, false
	}
	ev.Type, ev.Name, ev.SessionID, ev.UserID = r.text(f[0]), r.text(f[1]), r.text(f[2]), r.text(f[3])
	ev.Channel, ev.Platform, ev.SelectedHandler, ev.RuntimeTime = r.text(f[4]), r.text(f[5]), r.text(f[6]), r.text(f[7])
	if len(f[8]) > 0 {
		ev.Payload, ev.PayloadCut, ev.PayloadBytes = cut(f[8], payloadBytes)
	}
	return ev, true
}

// appOfKey is the app a record's key names: the key up to its first '/'
// on the events topic ("<appId>/<sessionId>"), the whole key on the
// quarantine topic. App IDs hold no '/'.
func appOfKey(key []byte, quarantined bool) []byte {
	if !quarantined {
		if i := bytes.IndexByte(key, '/'); i >= 0 {
			return key[:i]
		}
	}
	return key
}
