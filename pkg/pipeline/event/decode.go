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
	// Tags are the event's top-level tag (where the reference client puts
	// it), else a REQUEST_RESPONSE payload's tag: a string gives one, an
	// array its elements. Tag is the first of them.
	Tags            []string
	Tag             string
	MatchConfidence *float32
	DisplayCount    int
	// ErrorMessage and ErrorStack (JSON text) come from ERROR payloads
	// {message, stack}; a LambdaErrorEvent's string payload is its message.
	ErrorMessage, ErrorStack string
	// Message is the payload when it is a JSON string, as MessageEvent's is.
	Message string
	// KBUsed says the request carried a knowledgeBaseResult; KBDocuments
	// counts its documents and suggested documents, KBFAQs its FAQs.
	KBUsed              bool
	KBDocuments, KBFAQs int
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

// recordHeader is what envelopes and quarantine records both begin with.
type recordHeader struct {
	eventID, appID, organizationID string
	receivedAt                     time.Time
}

// open checks that value is a JSON object, looks up keys in it (the first
// four being eventId, appId, organizationId and receivedAt) and reads the
// header they give.
func (d *Decoder) open(value []byte, keys []string, vals [][]byte) (walker, recordHeader, error) {
	var h recordHeader
	d.scratch = d.scratch[:0]
	w := walker{&d.ct, &d.scratch}
	if err := strictJSON(value, &d.ct); err != nil {
		return w, h, envelopeErr("not JSON: %v", err)
	}
	root := value[skipWS(value, 0):]
	if root[0] != '{' {
		return w, h, envelopeErr("not a JSON object")
	}
	if dup := w.fields(root, keys, vals); dup != "" {
		return w, h, envelopeErr("%s appears twice", dup)
	}
	b, err := d.text(w, "eventId", vals[0], true)
	if err != nil {
		return w, h, err
	}
	h.eventID = string(b)
	if b, err = d.text(w, "appId", vals[1], true); err != nil {
		return w, h, err
	}
	h.appID = d.intern(b)
	if b, err = d.text(w, "organizationId", vals[2], false); err != nil {
		return w, h, err
	}
	h.organizationID = d.intern(b)
	if b, err = d.text(w, "receivedAt", vals[3], true); err != nil {
		return w, h, err
	}
	if h.receivedAt, err = time.Parse(time.RFC3339Nano, string(b)); err != nil {
		return w, h, envelopeErr("receivedAt %q is not an RFC 3339 time", b)
	}
	h.receivedAt = h.receivedAt.UTC()
	return w, h, nil
}

// Decode reads one envelope (schemas/events/envelope.schema.json).
func (d *Decoder) Decode(value []byte) (Decoded, error) {
	var out Decoded
	var top [5][]byte
	w, h, err := d.open(value, []string{"eventId", "appId", "organizationId", "receivedAt", "event"}, top[:])
	if err != nil {
		return out, err
	}
	out.EventID, out.AppID, out.OrganizationID, out.ReceivedAt = h.eventID, h.appID, h.organizationID, h.receivedAt
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

// Event types whose payloads fill columns of their own.
const (
	typeRequest     = "REQUEST"
	typeError       = "ERROR"
	typeLambdaError = "LambdaErrorEvent"
)

func (d *Decoder) decodeEvent(out *Decoded, ev []byte, w walker) error {
	var cols [12][]byte
	var tag []byte
	d.extra = append(d.extra[:0], '{')
	m := newMembers(w.ct, ev)
	for {
		raw, start, end, ok := m.next()
		if !ok {
			break
		}
		k := keyName(raw, w.sc)
		c := eventColumn(k)
		if c < 0 {
			if string(k) == "tag" { // kept in extra as well, as sent
				tag = ev[start:end]
			}
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
	if out.Type == typeRequest {
		out.RequestType = out.Name // the request type, unless the payload names it
	}
	out.Tags = d.appendTags(out.Tags[:0], tag, w)
	p := cols[10]
	if p == nil || p[0] == 'n' {
		out.Tag = firstTag(out.Tags)
		return nil
	}
	out.Payload = string(p)
	switch {
	case p[0] == '"':
		out.Message = string(stringValue(p, w.sc))
		if out.Type == typeError || out.Type == typeLambdaError {
			out.ErrorMessage = out.Message
		}
	case p[0] != '{':
	case out.Name == nameRequestResponse:
		d.decodeRequestResponse(out, p, w, tag == nil)
	case out.Type == typeRequest:
		d.decodeRequest(out, p, w)
	case out.Type == typeError:
		var e [2][]byte
		w.fields(p, []string{"message", "stack"}, e[:])
		out.ErrorMessage = text(e[0], w)
		if s := e[1]; s != nil && s[0] != 'n' {
			out.ErrorStack = string(s)
		}
	}
	out.Tag = firstTag(out.Tags)
	return nil
}

func firstTag(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	return tags[0]
}

// text returns the content of a JSON string value, or "" for any other.
func text(v []byte, w walker) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return string(stringValue(v, w.sc))
}

// appendTags adds the tags a tag value holds: a string is one tag, an
// array's strings are tags; other values keep their JSON text.
func (d *Decoder) appendTags(dst []string, v []byte, w walker) []string {
	switch {
	case v == nil || v[0] == 'n':
		return dst
	case v[0] == '"':
		return append(dst, d.intern(stringValue(v, w.sc)))
	case v[0] != '[':
		return append(dst, string(v))
	}
	e := newElements(w.ct, v)
	for {
		start, end, ok := e.next()
		if !ok {
			return dst
		}
		if el := v[start:end]; el[0] == '"' {
			dst = append(dst, d.intern(stringValue(el, w.sc)))
		} else if el[0] != 'n' {
			dst = append(dst, string(el))
		}
	}
}

// decodeRequest fills the request columns from a REQUEST event's payload
// {request, intent, slots, matchConfidence, rawQuery}, which the reference
// client builds from the request; the request's own fields fill what the
// payload leaves out.
func (d *Decoder) decodeRequest(out *Decoded, p []byte, w walker) {
	var top [4][]byte
	w.fields(p, []string{"request", "intent", "rawQuery", "matchConfidence"}, top[:])
	if req := top[0]; req != nil && req[0] == '{' {
		d.decodeRequestObject(out, req, w)
	}
	if v := top[1]; v != nil && v[0] == '"' {
		out.IntentID = d.intern(stringValue(v, w.sc))
	}
	if v := top[2]; v != nil && v[0] == '"' {
		out.RawQuery = string(stringValue(v, w.sc))
	}
	if c := confidence(top[3]); c != nil {
		out.MatchConfidence = c
	}
}

// decodeRequestObject fills the columns a request object names: its type,
// intent, raw query, match confidence and knowledge-base result.
func (d *Decoder) decodeRequestObject(out *Decoded, req []byte, w walker) {
	var r [5][]byte
	w.fields(req, []string{"type", "intentId", "rawQuery", "matchConfidence", "knowledgeBaseResult"}, r[:])
	if r[0] != nil && r[0][0] == '"' {
		out.RequestType = d.internText(r[0], w)
	}
	out.IntentID, out.RawQuery = d.internText(r[1], w), text(r[2], w)
	out.MatchConfidence = confidence(r[3])
	if kb := r[4]; kb != nil && kb[0] == '{' {
		out.KBUsed = true
		var parts [3][]byte
		w.fields(kb, []string{"documents", "suggested", "faqs"}, parts[:])
		out.KBDocuments = count(parts[0], w) + count(parts[1], w)
		out.KBFAQs = count(parts[2], w)
	}
}

// confidence reads a match confidence that a 32-bit float holds.
func confidence(c []byte) *float32 {
	if c == nil || !isNumber(c) {
		return nil
	}
	f, err := strconv.ParseFloat(string(c), 32)
	if err != nil {
		return nil
	}
	f32 := float32(f)
	return &f32
}

// count returns the number of elements of an array value, 0 for others.
func count(v []byte, w walker) int {
	if v == nil || v[0] != '[' {
		return 0
	}
	n := 0
	for e := newElements(w.ct, v); ; n++ {
		if _, _, ok := e.next(); !ok {
			return n
		}
	}
}

// decodeRequestResponse fills the REQUEST_RESPONSE columns from a payload
// that ingest has already checked; the payload's tag counts when the event
// had none at its top level.
func (d *Decoder) decodeRequestResponse(out *Decoded, p []byte, w walker, payloadTag bool) {
	var top [3][]byte
	w.fields(p, []string{"request", "response", "tag"}, top[:])
	if payloadTag {
		out.Tags = d.appendTags(out.Tags, top[2], w)
	}
	if req := top[0]; req != nil && req[0] == '{' {
		d.decodeRequestObject(out, req, w)
	}
	if resp := top[1]; resp != nil && resp[0] == '{' {
		var r [2][]byte
		w.fields(resp, []string{"outputSpeech", "displays"}, r[:])
		switch s := r[0]; {
		case s == nil:
		case s[0] == '"':
			out.DisplayText = text(s, w)
		case s[0] == '{':
			var sp [2][]byte
			w.fields(s, []string{"displayText", "ssml"}, sp[:])
			out.DisplayText, out.SSML = text(sp[0], w), text(sp[1], w)
		}
		out.DisplayCount = count(r[1], w)
	}
}

func (d *Decoder) internText(v []byte, w walker) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return d.intern(stringValue(v, w.sc))
}

// Quarantined is one quarantine record (schemas/events/quarantine.schema.json)
// mapped to the columns of the quarantine table.
type Quarantined struct {
	EventID, AppID, OrganizationID string
	ReceivedAt                     time.Time
	Index                          int
	// Reason, Field and Message are the first error's.
	Reason, Field, Message string
	// Errors is every error, as the JSON array the record holds.
	Errors string
	// Event is the event as sent (JSON text); when Truncated, the first
	// part of that text.
	Event      string
	EventBytes int
	Truncated  bool
}

// DecodeQuarantine reads one quarantine record.
func (d *Decoder) DecodeQuarantine(value []byte) (Quarantined, error) {
	var out Quarantined
	var top [9][]byte
	keys := []string{"eventId", "appId", "organizationId", "receivedAt", "index", "errors", "event", "truncated", "size"}
	w, h, err := d.open(value, keys, top[:])
	if err != nil {
		return out, err
	}
	out.EventID, out.AppID, out.OrganizationID, out.ReceivedAt = h.eventID, h.appID, h.organizationID, h.receivedAt
	if v := top[4]; v != nil {
		if out.Index, err = strconv.Atoi(string(v)); err != nil || out.Index < 0 {
			return out, envelopeErr("index %s is not a count", v)
		}
	}
	errs := top[5]
	if errs == nil || errs[0] != '[' {
		return out, envelopeErr("errors is missing or not an array")
	}
	out.Errors = string(errs)
	elems := newElements(w.ct, errs)
	if start, end, ok := elems.next(); ok {
		var f [3][]byte
		if first := errs[start:end]; first[0] == '{' {
			w.fields(first, []string{"reason", "field", "message"}, f[:])
			out.Reason, out.Field, out.Message = d.internText(f[0], w), text(f[1], w), text(f[2], w)
		}
	}
	ev := top[6]
	if ev == nil {
		return out, envelopeErr("event is missing")
	}
	out.Truncated = top[7] != nil && string(top[7]) == "true"
	out.Event, out.EventBytes = string(ev), len(ev)
	if out.Truncated {
		out.Event = text(ev, w)
		if out.EventBytes, err = strconv.Atoi(string(top[8])); err != nil {
			out.EventBytes = len(out.Event)
		}
	}
	return out, nil
}
