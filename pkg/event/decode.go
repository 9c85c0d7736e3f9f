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
	Payload []byte
	// Extra holds the event's other top-level fields as a JSON object.
	Extra []byte
}

// Decoder decodes envelopes. It reuses its scratch space, so one Decoder
// serves one goroutine.
type Decoder struct {
	ct      containers
	scratch []byte
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
	str := func(name string, v []byte, required bool) (string, error) {
		if v == nil || v[0] == 'n' {
			if required {
				return "", envelopeErr("%s is missing", name)
			}
			return "", nil
		}
		if v[0] != '"' {
			return "", envelopeErr("%s is a %s, not a string", name, typeName(v))
		}
		return string(stringValue(v, w.sc)), nil
	}
	var err error
	if out.EventID, err = str("eventId", top[0], true); err != nil {
		return out, err
	}
	if out.AppID, err = str("appId", top[1], true); err != nil {
		return out, err
	}
	if out.OrganizationID, err = str("organizationId", top[2], false); err != nil {
		return out, err
	}
	received, err := str("receivedAt", top[3], true)
	if err != nil {
		return out, err
	}
	if out.ReceivedAt, err = time.Parse(time.RFC3339Nano, received); err != nil {
		return out, envelopeErr("receivedAt %q is not an RFC 3339 time", received)
	}
	out.ReceivedAt = out.ReceivedAt.UTC()
	ev := top[4]
	if ev == nil || ev[0] != '{' {
		return out, envelopeErr("event is missing or not an object")
	}
	return out, d.decodeEvent(&out, ev, w, str)
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

func (d *Decoder) decodeEvent(out *Decoded, ev []byte, w walker, str func(string, []byte, bool) (string, error)) error {
	var cols [12][]byte
	extra := append(make([]byte, 0, 64), '{')
	m := newMembers(w.ct, ev)
	for {
		raw, start, end, ok := m.next()
		if !ok {
			break
		}
		c := eventColumn(keyName(raw, w.sc))
		if c < 0 {
			if len(extra) > 1 {
				extra = append(extra, ',')
			}
			extra = append(extra, '"')
			extra = append(extra, raw...)
			extra = append(extra, `":`...)
			extra = append(extra, ev[start:end]...)
			continue
		}
		cols[c] = ev[start:end]
	}
	out.Extra = append(extra, '}')

	dst := []*string{&out.Type, &out.Name, &out.SessionID, &out.UserID, &out.Channel, &out.Platform,
		&out.SelectedHandler, &out.CurrentHandler, &out.Environment}
	names := []string{"type", "name", "sessionId", "userId", "channel", "platform", "selectedHandler", "currentHandler", "environment"}
	for i, p := range dst {
		v := cols[i]
		if v != nil && v[0] != '"' && v[0] != 'n' {
			// Unchecked fields of another type keep their JSON text.
			*p = string(v)
			continue
		}
		s, err := str("event."+names[i], v, false)
		if err != nil {
			return err
		}
		*p = s
	}
	out.EventTime = out.ReceivedAt
	if v := cols[9]; v != nil && v[0] == '"' {
		if t, err := time.Parse(time.RFC3339Nano, string(stringValue(v, w.sc))); err == nil {
			out.EventTime = t.UTC()
		}
	}
	if p := cols[10]; p != nil && p[0] != 'n' {
		out.Payload = append([]byte(nil), p...)
		if out.Name == nameRequestResponse && p[0] == '{' {
			decodeRequestResponse(out, p, w)
		}
	}
	return nil
}

// decodeRequestResponse fills the REQUEST_RESPONSE columns from a payload
// that ingest has already checked.
func decodeRequestResponse(out *Decoded, p []byte, w walker) {
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
		out.RequestType, out.IntentID, out.RawQuery = text(r[0]), text(r[1]), text(r[2])
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
