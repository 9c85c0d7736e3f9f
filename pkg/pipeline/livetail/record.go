package livetail

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
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

// scanFields reads the fields of a record's value: an envelope of the
// events topic or a quarantine record. ok is false for a value that is
// not such a JSON object.
func scanFields(value []byte) (f fields, ok bool) {
	var event []byte
	ok = eachMember(value, func(key, val []byte) bool {
		switch string(key) {
		case "appId":
			f.appID = val
		case "eventId":
			f.eventID = val
		case "event":
			event = val
		}
		return true
	})
	if !ok || len(event) == 0 || event[0] != '{' {
		return f, ok
	}
	ok = eachMember(event, func(key, val []byte) bool {
		switch string(key) {
		case "type":
			f.typ = val
		case "name":
			f.name = val
		case "sessionId":
			f.sessionID = val
		case "userId":
			f.userID = val
		}
		return true
	})
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

// text is the raw JSON value v shown as a string field: a string's value,
// nothing for null or absent, else the value's JSON text; cut at
// MaxFieldBytes.
func text(v []byte) string {
	var s string
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
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
// ok is false for a value that is neither.
func decode(value []byte, quarantined bool, partition int, offset int64, payloadBytes int) (Event, bool) {
	var rec struct {
		eventID, receivedAt, event, errors []byte
		truncated                          bool
		size                               int
	}
	if !eachMember(value, func(key, val []byte) bool {
		switch string(key) {
		case "eventId":
			rec.eventID = val
		case "receivedAt":
			rec.receivedAt = val
		case "event":
			rec.event = val
		case "errors":
			rec.errors = val
		case "truncated":
			rec.truncated = string(val) == "true"
		case "size":
			rec.size, _ = strconv.Atoi(string(val))
		}
		return true
	}) || len(rec.event) == 0 {
		return Event{}, false
	}
	ev := Event{EventID: text(rec.eventID), Status: StatusStored, ReceivedAt: text(rec.receivedAt), Partition: partition, Offset: offset}
	if quarantined {
		ev.Status = StatusQuarantined
		if len(rec.errors) > 0 && json.Unmarshal(rec.errors, &ev.Reasons) != nil {
			return Event{}, false
		}
	}
	if rec.event[0] != '{' || rec.truncated {
		// Not an object, or kept in part: shown as sent, nothing to read in it.
		ev.Sent, ev.SentCut, ev.SentBytes = cut(rec.event, payloadBytes)
		if rec.truncated {
			ev.SentCut, ev.SentBytes = true, rec.size
		}
		return ev, true
	}
	var payload []byte
	ok := eachMember(rec.event, func(key, val []byte) bool {
		switch string(key) {
		case "type":
			ev.Type = text(val)
		case "name":
			ev.Name = text(val)
		case "sessionId":
			ev.SessionID = text(val)
		case "userId":
			ev.UserID = text(val)
		case "channel":
			ev.Channel = text(val)
		case "platform":
			ev.Platform = text(val)
		case "selectedHandler":
			ev.SelectedHandler = text(val)
		case "isoTime":
			ev.RuntimeTime = text(val)
		case "payload":
			payload = val
		}
		return true
	})
	if !ok {
		return Event{}, false
	}
	if len(payload) > 0 {
		ev.Payload, ev.PayloadCut, ev.PayloadBytes = cut(payload, payloadBytes)
	}
	return ev, true
}

// eachMember calls fn with the key (unescaped) and raw value of each
// member of the JSON object b, until fn returns false. It reports false
// when b is not a well-formed object as far as it read: records come from
// ingest, but the topics are a shared resource and anything may be on
// them.
func eachMember(b []byte, fn func(key, val []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end, ok := skipString(b, i)
		if !ok {
			return false
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(b[i:end], &k) != nil {
				return false
			}
			key = []byte(k)
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		start := skipWS(b, i+1)
		end, ok = skipValue(b, start)
		if !ok {
			return false
		}
		if !fn(key, b[start:end]) {
			return true
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i = skipWS(b, i+1)
		default:
			return false
		}
	}
	return false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that opens at b[i].
func skipString(b []byte, i int) (int, bool) {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, false
		}
		i += q
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, true
		}
	}
}

// skipValue returns the index after the value that starts at b[i]. It
// checks the nesting of containers and the ends of strings, not the rest
// of JSON's grammar: enough to find members, which decode reads again.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\n' && b[i] != '\t' && b[i] != '\r' {
		i++
	}
	return i, i > start
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
