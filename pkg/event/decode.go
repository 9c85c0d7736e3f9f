package event

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Decoded is one envelope from the events topic, mapped to the fields
// analysts query. Strings are copies; Payload and Extra are JSON text.
type Decoded struct {
	EventID, AppID, OrganizationID string
	ReceivedAt                     time.Time
	// EventTime is the event's isoTime when it is a valid RFC 3339 time,
	// else ReceivedAt: identical for every copy of a retried event.
	EventTime                                          time.Time
	Type, Name, SessionID, UserID, Channel, Platform   string
	SelectedHandler, CurrentHandler, Environment       string
	RequestType, IntentID, RawQuery, DisplayText, SSML string
	Tag                                                string
	MatchConfidence                                    *float32
	DisplayCount                                       int
	// Payload is the payload as JSON, empty when there was none.
	Payload string
	// Extra holds the event's other top-level fields as a JSON object.
	Extra string
}

// Decoder decodes envelopes. It reuses its scratch space, so one Decoder
// serves one goroutine.
type Decoder struct {
	ct      containers
	scratch []byte
	extra   []byte
	// interned keeps one copy of the strings that repeat from event to
	// event (apps, types, channels, handlers...), so decoding them does
	// not allocate each time.
	interned map[string]string
}

// maxInterned bounds the interned strings; past it the cache starts over.
const maxInterned = 4096

func (d *Decoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if d.interned == nil || len(d.interned) >= maxInterned {
		d.interned = make(map[string]string, 256)
	}
	s := string(b)
	d.interned[s] = s
	return s
}

// ErrEnvelope marks an envelope that can never be decoded.
var ErrEnvelope = errors.New("invalid envelope")

func envelopeErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrEnvelope, fmt.Sprintf(format, a...))
}

// Decode reads one envelope (schemas/events/envelope.schema.json).
func (d *Decoder) Decode(value []byte) (Decoded, error) {
	var out Decoded
	if err := strictJSON(value, &d.ct); err != nil {
		return out, envelopeErr("not JSON: %v", err)
	}
	root := value[skipWS(value, 0):]
	if root[0] != '{' {
		return out, envelopeErr("not a JSON object")
	}
	d.scratch = d.scratch[:0]
	w := walker{&d.ct, &d.scratch}
	var top [5][]byte
	if dup := w.fields(root, []string{"eventId", "appId", "organizationId", "receivedAt", "event"}, top[:]); dup != "" {
		return out, envelopeErr("%s appears twice", dup)
	}
	var err error
	var b []byte
	if b, err = d.text(w, "eventId", top[0], true); err != nil {
		return out, err
	}
	out.EventID = string(b)
	if b, err = d.text(w, "appId", top[1], true); err != nil {
		return out, err
	}
	out.AppID = d.intern(b)
	if b, err = d.text(w, "organizationId", top[2], false); err != nil {
		return out, err
	}
	out.OrganizationID = d.intern(b)
	received, err := d.text(w, "receivedAt", top[3], true)
	if err != nil {
		return out, err
	}
	if out.ReceivedAt, err = time.Parse(time.RFC3339Nano, string(received)); err != nil {
		return out, envelopeErr("receivedAt %q is not an RFC 3339 time", received)
	}
	out.ReceivedAt = out.ReceivedAt.UTC()
	ev := top[4]
	if ev == nil || ev[0] != '{' {
		return out, envelopeErr("event is missing or not an object")
	}
	return out, d.decodeEvent(&out, ev, w)
}

// text returns the decoded content of a string value; absent and null give
// nil, or an error when required.
func (d *Decoder) text(w walker, name string, v []byte, required bool) ([]byte, error) {
	if v == nil || v[0] == 'n' {
		if required {
			return nil, envelopeErr("%s is missing", name)
		}
		return nil, nil
	}
	if v[0] != '"' {
		return nil, envelopeErr("%s is a %s, not a string", name, typeName(v))
	}
	return stringValue(v, w.sc), nil
}

// eventColumns are the event's top-level fields with columns of their own;
// everything else goes to Extra.
func eventColumn(k []byte) int {
	switch string(k) {
	case "type":
		return 0
	case "name":
		return 1
	case "sessionId":
		return 2
	case "userId":
		return 3
	case "channel":
		return 4
	case "platform":
		return 5
	case "selectedHandler":
		return 6
	case "currentHandler":
		return 7
	case "environment":
		return 8
	case "isoTime":
		return 9
	case "payload":
		return 10
	case "appId", "eventId":
		return 11 // in the envelope already
	}
	return -1
}

func (d *Decoder) decodeEvent(out *Decoded, ev []byte, w walker) error {
	var cols [12][]byte
	d.extra = append(d.extra[:0], '{')
	m := newMembers(w.ct, ev)
	for {
		raw, start, end, ok := m.next()
		if !ok {
			break
		}
		c := eventColumn(keyName(raw, w.sc))
		if c < 0 {
			if len(d.extra) > 1 {
				d.extra = append(d.extra, ',')
			}
			d.extra = append(d.extra, '"')
			d.extra = append(d.extra, raw...)
			d.extra = append(d.extra, `":`...)
			d.extra = append(d.extra, ev[start:end]...)
			continue
		}
		cols[c] = ev[start:end]
	}
	out.Extra = string(append(d.extra, '}'))

	// Fields that ingest does not check may hold any JSON; a value that is
	// not a string keeps its JSON text.
	field := func(v []byte, unique bool) string {
		switch {
		case v == nil || v[0] == 'n':
			return ""
		case v[0] != '"':
			return string(v)
		case unique:
			return string(stringValue(v, w.sc))
		default:
			return d.intern(stringValue(v, w.sc))
		}
	}
	out.Type, out.Name = field(cols[0], false), field(cols[1], false)
	out.SessionID, out.UserID = field(cols[2], true), field(cols[3], true)
	out.Channel, out.Platform = field(cols[4], false), field(cols[5], false)
	out.SelectedHandler, out.CurrentHandler, out.Environment = field(cols[6], false), field(cols[7], false), field(cols[8], false)
	out.EventTime = out.ReceivedAt
	if v := cols[9]; v != nil && v[0] == '"' {
		if t, err := time.Parse(time.RFC3339Nano, string(stringValue(v, w.sc))); err == nil {
			out.EventTime = t.UTC()
		}
	}
	if p := cols[10]; p != nil && p[0] != 'n' {
		out.Payload = string(p)
		if out.Name == nameRequestResponse && p[0] == '{' {
			d.decodeRequestResponse(out, p, w)
		}
	}
	return nil
}

// decodeRequestResponse fills the REQUEST_RESPONSE columns from a payload
// that ingest has already checked.
func (d *Decoder) decodeRequestResponse(out *Decoded, p []byte, w walker) {
	var top [3][]byte
	w.fields(p, []string{"request", "response", "tag"}, top[:])
	text := func(v []byte) string {
		if v == nil || v[0] != '"' {
			return ""
		}
		return string(stringValue(v, w.sc))
	}
	out.Tag = text(top[2])
	if req := top[0]; req != nil && req[0] == '{' {
		var r [4][]byte
		w.fields(req, []string{"type", "intentId", "rawQuery", "matchConfidence"}, r[:])
		out.RequestType, out.IntentID, out.RawQuery = d.internText(r[0], w), d.internText(r[1], w), text(r[2])
		if c := r[3]; c != nil && isNumber(c) {
			if f, err := strconv.ParseFloat(string(c), 32); err == nil {
				f32 := float32(f)
				out.MatchConfidence = &f32
			}
		}
	}
	if resp := top[1]; resp != nil && resp[0] == '{' {
		var r [2][]byte
		w.fields(resp, []string{"outputSpeech", "displays"}, r[:])
		switch s := r[0]; {
		case s == nil:
		case s[0] == '"':
			out.DisplayText = text(s)
		case s[0] == '{':
			var sp [2][]byte
			w.fields(s, []string{"displayText", "ssml"}, sp[:])
			out.DisplayText, out.SSML = text(sp[0]), text(sp[1])
		}
		if ds := r[1]; ds != nil && ds[0] == '[' {
			e := newElements(w.ct, ds)
			for {
				if _, _, ok := e.next(); !ok {
					break
				}
				out.DisplayCount++
			}
		}
	}
}

func (d *Decoder) internText(v []byte, w walker) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return d.intern(stringValue(v, w.sc))
}
