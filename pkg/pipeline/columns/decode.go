// Package columns turns the records of the events and quarantine topics
// into rows of their ClickHouse tables: the consumer's side of the
// envelopes that package event writes. What the event model means stays in
// event; which columns a field fills, and which time an event is dated by,
// is decided here, so that changing the tables touches neither the model
// nor ingest.
package columns

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

// Decoder decodes the records of the events and quarantine topics into
// rows of their ClickHouse tables. It reuses its scratch space, so one
// Decoder serves one goroutine.
type Decoder struct {
	// Times bounds the runtime times that become event times; zero
	// fields take their defaults.
	Times TimeWindow

	index   jsonscan.Index // of the record being decoded
	scratch []byte
	extra   []byte
	tags    [][]byte
	strs    []string
	// interned keeps one copy of the values of low-cardinality columns
	// (apps, types, channels, handlers...). The insert hashes every such
	// value to build the column's dictionary, which costs a cache miss per
	// row when equal values lie apart in the batch's text, and little when
	// they share one copy.
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

// TimeWindow is how far from ingest's receipt a runtime's own time
// (isoTime) may lie and still be an event's time, which the rollups and
// suggestions count days by. A runtime's clock is its own, and anyone can
// send events, so a time outside the window is kept only as the runtime's
// (events.runtime_time) and the receipt is the event's time: nobody can
// date an event in a future day, which retention would never reach, or
// in a past long gone.
type TimeWindow struct {
	// MaxFuture is how far after the receipt a runtime's time may lie:
	// a clock that runs ahead.
	MaxFuture time.Duration
	// MaxPast is how far before the receipt it may lie: events a runtime
	// kept while it could not send them, sent again later.
	MaxPast time.Duration
}

// Defaults of TimeWindow.
const (
	DefaultMaxFuture = 5 * time.Minute
	DefaultMaxPast   = 7 * 24 * time.Hour
)

// WithDefaults fills zero fields with their defaults.
func (w TimeWindow) WithDefaults() TimeWindow {
	if w.MaxFuture <= 0 {
		w.MaxFuture = DefaultMaxFuture
	}
	if w.MaxPast <= 0 {
		w.MaxPast = DefaultMaxPast
	}
	return w
}

// holds reports whether a runtime's time t may be the event time of an
// event received at received.
func (w TimeWindow) holds(t, received time.Time) bool {
	w = w.WithDefaults()
	return !t.After(received.Add(w.MaxFuture)) && !t.Before(received.Add(-w.MaxPast))
}

// maxRuntimeUnix is the last second a runtime_time column holds
// (2105-12-31T23:59:59Z), from the first (the Unix epoch): the range of
// ClickHouse's DateTime, the narrower of the types the column has on old
// and current servers. Other times would be stored wrapped around.
const maxRuntimeUnix = 4291747199

// ErrEnvelope marks an envelope that can never be decoded.
var ErrEnvelope = errors.New("invalid envelope")

func envelopeErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrEnvelope, fmt.Sprintf(format, a...))
}

// recordHeader is what envelopes and quarantine records both begin with,
// as parts of the record.
type recordHeader struct {
	eventID, appID, organizationID []byte
	receivedAt                     time.Time
}

// open checks that value is a JSON object, looks up keys in it (the first
// four being eventId, appId, organizationId and receivedAt) and reads the
// header they give.
func (d *Decoder) open(value []byte, keys []string, vals [][]byte) (jsonscan.Walker, recordHeader, error) {
	var h recordHeader
	d.scratch = d.scratch[:0]
	w := jsonscan.Walker{Index: &d.index, Scratch: &d.scratch}
	if err := jsonscan.Check(value, &d.index); err != nil {
		return w, h, envelopeErr("not JSON: %v", err)
	}
	root := value[jsonscan.SkipWS(value, 0):]
	if root[0] != '{' {
		return w, h, envelopeErr("not a JSON object")
	}
	if dup := w.Fields(root, keys, vals); dup != "" {
		return w, h, envelopeErr("%s appears twice", dup)
	}
	var err error
	if h.eventID, err = d.text(w, "eventId", vals[0], true); err != nil {
		return w, h, err
	}
	if h.appID, err = d.text(w, "appId", vals[1], true); err != nil {
		return w, h, err
	}
	if h.organizationID, err = d.text(w, "organizationId", vals[2], false); err != nil {
		return w, h, err
	}
	b, err := d.text(w, "receivedAt", vals[3], true)
	if err != nil {
		return w, h, err
	}
	if h.receivedAt, err = time.Parse(time.RFC3339Nano, string(b)); err != nil {
		return w, h, envelopeErr("receivedAt %q is not an RFC 3339 time", b)
	}
	h.receivedAt = h.receivedAt.UTC()
	return w, h, nil
}

// Decode reads one envelope (schemas/events/envelope.schema.json) into a
// new row of rows and returns the row's index; the caller sets where the
// record was read. An envelope that cannot be decoded adds no row.
func (d *Decoder) Decode(value []byte, rows *chstore.EventBatch) (int, error) {
	var top [7][]byte
	w, h, err := d.open(value, []string{"eventId", "appId", "organizationId", "receivedAt", "event", "tokenId", "clientNetwork"}, top[:])
	if err != nil {
		return 0, err
	}
	ev := top[4]
	if ev == nil || ev[0] != '{' {
		return 0, envelopeErr("event is missing or not an object")
	}
	// Envelopes written before ingest recorded the sender have neither.
	token, err := d.text(w, "tokenId", top[5], false)
	if err != nil {
		return 0, err
	}
	network, err := d.text(w, "clientNetwork", top[6], false)
	if err != nil {
		return 0, err
	}
	r := rowWriter{d: d, rows: rows, i: rows.AddRow(), w: w}
	rows.EventID[r.i], rows.AppID[r.i], rows.OrganizationID[r.i] = r.str(h.eventID), d.intern(h.appID), d.intern(h.organizationID)
	rows.ReceivedAt[r.i] = h.receivedAt
	if len(token)+len(network) > 0 {
		rows.TokenID[r.i], rows.ClientNetwork[r.i] = d.intern(token), d.intern(network)
	}
	d.decodeEvent(r, ev)
	return r.i, nil
}

// rowWriter fills one row of a batch from parts of one record.
type rowWriter struct {
	d    *Decoder
	rows *chstore.EventBatch
	i    int
	w    jsonscan.Walker
}

// str returns b as a string kept with the batch.
func (r rowWriter) str(b []byte) string { return r.rows.String(b) }

// field returns a value of a field that ingest does not check, which may
// hold any JSON: a string's content, or else the value's JSON text; null
// and absent give "". A label is the value of a low-cardinality column.
func (r rowWriter) field(v []byte, label bool) string {
	switch {
	case v == nil || v[0] == 'n':
		return ""
	case v[0] != '"':
		return r.str(v)
	case label:
		return r.d.intern(r.w.String(v))
	}
	return r.str(r.w.String(v))
}

// text returns the content of a JSON string value, or "" for any other.
func (r rowWriter) text(v []byte) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return r.str(r.w.String(v))
}

// label is text for the value of a low-cardinality column.
func (r rowWriter) label(v []byte) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return r.d.intern(r.w.String(v))
}

// text returns the decoded content of a string value; absent and null give
// nil, or an error when required.
func (d *Decoder) text(w jsonscan.Walker, name string, v []byte, required bool) ([]byte, error) {
	if v == nil || v[0] == 'n' {
		if required {
			return nil, envelopeErr("%s is missing", name)
		}
		return nil, nil
	}
	if v[0] != '"' {
		return nil, envelopeErr("%s is a %s, not a string", name, jsonscan.TypeName(v))
	}
	return w.String(v), nil
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

func (d *Decoder) decodeEvent(r rowWriter, ev []byte) {
	rows, i, w := r.rows, r.i, r.w
	var cols [12][]byte
	var tag []byte
	d.extra = append(d.extra[:0], '{')
	m := w.Members(ev)
	for {
		raw, start, end, ok := m.Next()
		if !ok {
			break
		}
		k := jsonscan.KeyName(raw, w.Scratch)
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
	rows.EventTime[i] = rows.ReceivedAt[i]
	if v := cols[9]; v != nil && v[0] != 'n' {
		if !d.setTimes(r, v) {
			// Kept as sent, as any field without a column is.
			if len(d.extra) > 1 {
				d.extra = append(d.extra, ',')
			}
			d.extra = append(d.extra, `"isoTime":`...)
			d.extra = append(d.extra, v...)
		}
	}
	rows.Extra[i] = r.str(append(d.extra, '}'))

	rows.Type[i], rows.Name[i] = r.field(cols[0], true), r.field(cols[1], true)
	rows.SessionID[i], rows.UserID[i] = r.field(cols[2], false), r.field(cols[3], false)
	rows.Channel[i], rows.Platform[i] = r.field(cols[4], true), r.field(cols[5], true)
	rows.SelectedHandler[i], rows.CurrentHandler[i], rows.Environment[i] = r.field(cols[6], true), r.field(cols[7], true), r.field(cols[8], true)
	if rows.Type[i] == typeRequest {
		rows.RequestType[i] = rows.Name[i] // the request type, unless the payload names it
	}
	d.tags = d.appendTags(d.tags[:0], tag, w)
	if p := cols[10]; p != nil && p[0] != 'n' {
		rows.Payload[i] = r.str(p)
		d.decodePayload(r, p, tag == nil)
	}
	d.setTags(r)
}

// setTimes reads a runtime's isoTime v: a time the runtime_time column
// holds is the row's runtime time, and its event time too when the window
// holds it (the receipt, set before, otherwise). It reports whether v was
// such a time.
func (d *Decoder) setTimes(r rowWriter, v []byte) bool {
	if v[0] != '"' {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, string(r.w.String(v)))
	if err != nil {
		return false
	}
	t = t.UTC()
	if sec := t.Unix(); sec < 0 || sec > maxRuntimeUnix {
		return false
	}
	rows, i := r.rows, r.i
	rows.SetRuntimeTime(i, t)
	if d.Times.holds(t, rows.ReceivedAt[i]) {
		rows.EventTime[i] = t
		rows.EventTimeSource[i] = chstore.TimeSourceRuntime
	}
	return true
}

// decodePayload fills the columns a payload of the row's type holds;
// noTopTag says the event had no tag at its top level.
func (d *Decoder) decodePayload(r rowWriter, p []byte, noTopTag bool) {
	rows, i, w := r.rows, r.i, r.w
	typ := rows.Type[i]
	switch {
	case p[0] == '"':
		rows.Message[i] = r.text(p)
		if typ == typeError || typ == typeLambdaError {
			rows.ErrorMessage[i] = rows.Message[i]
		}
	case p[0] != '{':
	case rows.Name[i] == event.NameRequestResponse:
		d.decodeRequestResponse(r, p, noTopTag)
	case typ == typeRequest:
		d.decodeRequest(r, p)
	case typ == typeError:
		var e [2][]byte
		w.Fields(p, []string{"message", "stack"}, e[:])
		rows.ErrorMessage[i] = r.text(e[0])
		if s := e[1]; s != nil && s[0] != 'n' {
			rows.ErrorStack[i] = r.str(s)
		}
	}
}

// setTags stores the tags collected for the row.
func (d *Decoder) setTags(r rowWriter) {
	if len(d.tags) == 0 {
		return
	}
	d.strs = d.strs[:0]
	for _, t := range d.tags {
		d.strs = append(d.strs, r.str(t))
	}
	r.rows.SetTags(r.i, d.strs)
}

// appendTags adds the tags a tag value holds: a string is one tag, an
// array's strings are tags; other values keep their JSON text.
func (d *Decoder) appendTags(dst [][]byte, v []byte, w jsonscan.Walker) [][]byte {
	switch {
	case v == nil || v[0] == 'n':
		return dst
	case v[0] == '"':
		return append(dst, w.String(v))
	case v[0] != '[':
		return append(dst, v)
	}
	e := w.Elements(v)
	for {
		start, end, ok := e.Next()
		if !ok {
			return dst
		}
		if el := v[start:end]; el[0] == '"' {
			dst = append(dst, w.String(el))
		} else if el[0] != 'n' {
			dst = append(dst, el)
		}
	}
}

// decodeRequest fills the request columns from a REQUEST event's payload
// {request, intent, slots, matchConfidence, rawQuery}, which the reference
// client builds from the request; the request's own fields fill what the
// payload leaves out.
func (d *Decoder) decodeRequest(r rowWriter, p []byte) {
	rows, i, w := r.rows, r.i, r.w
	var top [4][]byte
	w.Fields(p, []string{"request", "intent", "rawQuery", "matchConfidence"}, top[:])
	if req := top[0]; req != nil && req[0] == '{' {
		d.decodeRequestObject(r, req)
	}
	if v := top[1]; v != nil && v[0] == '"' {
		rows.IntentID[i] = r.label(v)
	}
	if v := top[2]; v != nil && v[0] == '"' {
		rows.RawQuery[i] = r.text(v)
	}
	if c, ok := confidence(top[3]); ok {
		rows.SetMatchConfidence(i, c)
	}
}

// decodeRequestObject fills the columns a request object names: its type,
// intent, raw query, match confidence and knowledge-base result.
func (d *Decoder) decodeRequestObject(r rowWriter, req []byte) {
	rows, i, w := r.rows, r.i, r.w
	var f [5][]byte
	w.Fields(req, []string{"type", "intentId", "rawQuery", "matchConfidence", "knowledgeBaseResult"}, f[:])
	if f[0] != nil && f[0][0] == '"' {
		rows.RequestType[i] = r.label(f[0])
	}
	rows.IntentID[i], rows.RawQuery[i] = r.label(f[1]), r.text(f[2])
	if c, ok := confidence(f[3]); ok {
		rows.SetMatchConfidence(i, c)
	}
	if kb := f[4]; kb != nil && kb[0] == '{' {
		rows.KBUsed[i] = 1
		var parts [3][]byte
		w.Fields(kb, []string{"documents", "suggested", "faqs"}, parts[:])
		rows.KBDocuments[i] = clamp16(count(parts[0], w) + count(parts[1], w))
		rows.KBFAQs[i] = clamp16(count(parts[2], w))
	}
}

// clamp16 fits a count into a UInt16 column.
func clamp16(n int) uint16 { return uint16(min(n, 1<<16-1)) }

// confidence reads a match confidence that a 32-bit float holds.
func confidence(c []byte) (float32, bool) {
	if c == nil || !jsonscan.IsNumber(c) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(c), 32)
	if err != nil {
		return 0, false
	}
	return float32(f), true
}

// count returns the number of elements of an array value, 0 for others.
func count(v []byte, w jsonscan.Walker) int {
	if v == nil || v[0] != '[' {
		return 0
	}
	n := 0
	for e := w.Elements(v); ; n++ {
		if _, _, ok := e.Next(); !ok {
			return n
		}
	}
}

// decodeRequestResponse fills the REQUEST_RESPONSE columns from a payload
// that ingest has already checked; the payload's tag counts when the event
// had none at its top level.
func (d *Decoder) decodeRequestResponse(r rowWriter, p []byte, payloadTag bool) {
	rows, i, w := r.rows, r.i, r.w
	var top [3][]byte
	w.Fields(p, []string{"request", "response", "tag"}, top[:])
	if payloadTag {
		d.tags = d.appendTags(d.tags, top[2], w)
	}
	if req := top[0]; req != nil && req[0] == '{' {
		d.decodeRequestObject(r, req)
	}
	if resp := top[1]; resp != nil && resp[0] == '{' {
		var f [2][]byte
		w.Fields(resp, []string{"outputSpeech", "displays"}, f[:])
		switch s := f[0]; {
		case s == nil:
		case s[0] == '"':
			rows.DisplayText[i] = r.text(s)
		case s[0] == '{':
			var sp [2][]byte
			w.Fields(s, []string{"displayText", "ssml"}, sp[:])
			rows.DisplayText[i], rows.SSML[i] = r.text(sp[0]), r.text(sp[1])
		}
		rows.DisplayCount[i] = clamp16(count(f[1], w))
	}
}

// DecodeQuarantine reads one quarantine record
// (schemas/events/quarantine.schema.json) into a row of the quarantine
// table; the caller sets where the record was read.
func (d *Decoder) DecodeQuarantine(value []byte) (chstore.QuarantineRow, error) {
	var out chstore.QuarantineRow
	var top [9][]byte
	keys := []string{"eventId", "appId", "organizationId", "receivedAt", "index", "errors", "event", "truncated", "size"}
	w, h, err := d.open(value, keys, top[:])
	if err != nil {
		return out, err
	}
	out.EventID, out.AppID, out.OrganizationID, out.ReceivedAt = string(h.eventID), string(h.appID), string(h.organizationID), h.receivedAt
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
	elems := w.Elements(errs)
	if start, end, ok := elems.Next(); ok {
		var f [3][]byte
		if first := errs[start:end]; first[0] == '{' {
			w.Fields(first, []string{"reason", "field", "message"}, f[:])
			out.Reason, out.Field, out.Message = quarantineText(f[0], w), quarantineText(f[1], w), quarantineText(f[2], w)
		}
	}
	ev := top[6]
	if ev == nil {
		return out, envelopeErr("event is missing")
	}
	out.Truncated = top[7] != nil && string(top[7]) == "true"
	out.Event, out.EventBytes = string(ev), len(ev)
	if out.Truncated {
		out.Event = quarantineText(ev, w)
		if out.EventBytes, err = strconv.Atoi(string(top[8])); err != nil {
			out.EventBytes = len(out.Event)
		}
	}
	return out, nil
}

// quarantineText returns the content of a JSON string value, or "" for any
// other.
func quarantineText(v []byte, w jsonscan.Walker) string {
	if v == nil || v[0] != '"' {
		return ""
	}
	return string(w.String(v))
}
