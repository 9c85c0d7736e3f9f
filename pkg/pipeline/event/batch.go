package event

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/zeebo/xxh3"

	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

// Validator checks batches against Limits. It is safe for concurrent use.
type Validator struct {
	limits   Limits
	types    []string
	typeList string
	states   sync.Pool
	outs     sync.Pool // record buffers owned by Results until Release
}

// batchState is the scratch space of one ProcessBatch call, reused across
// calls so the hot path allocates little.
type batchState struct {
	scratch      []byte         // decoded strings of the event being checked
	bodyIndex    jsonscan.Index // where the body's arrays and objects end
	payloadIndex jsonscan.Index // the same for a payload sent as a string
	recs         []span         // where each record's key and value end in the Result's buffer
	evSpans      [][2]int       // where each event sits in the body
	problems     problems
}

// span locates a record in a buffer of records written one after the
// other, each key followed by its value.
type span struct{ keyEnd, valEnd int }

// outBuf returns a pooled buffer with room for n bytes.
func (v *Validator) outBuf(n int) *[]byte {
	if b, ok := v.outs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, n+n/4)
	return &b
}

// Release hands the Result's buffer back for reuse. Call it only once
// nothing reads the records any more: not after a publish that failed or
// timed out, as the producer may still be sending them.
func (r *Result) Release() {
	if r.out == nil || r.pool == nil || cap(*r.out) > maxPooledOut {
		return
	}
	r.pool.Put(r.out)
	r.out, r.Accepted, r.Quarantined = nil, nil, nil
}

// maxPooledOut keeps an unusually large batch from pinning memory.
const maxPooledOut = 2 << 20

// NewValidator returns a Validator; zero fields of l take their defaults.
func NewValidator(l Limits) *Validator {
	d := DefaultLimits()
	if l.MaxEvents <= 0 {
		l.MaxEvents = d.MaxEvents
	}
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = d.MaxEventBytes
	}
	if l.MaxRecordBytes <= 0 {
		l.MaxRecordBytes = d.MaxRecordBytes
	}
	v := &Validator{limits: l, types: l.Types, typeList: joinTypes(l.Types)}
	v.states.New = func() any { return new(batchState) }
	return v
}

// Limits returns the limits in force.
func (v *Validator) Limits() Limits { return v.limits }

func batchErr(kind BatchErrorKind, field, msg string) *BatchError {
	return &BatchError{Kind: kind, Field: field, Message: msg}
}

// ProcessBatch validates a request body and builds the Kafka records of its
// events. A body whose outer shape is wrong yields a *BatchError; otherwise
// every event ends up either accepted or quarantined with its reasons.
func (v *Validator) ProcessBatch(body []byte, meta Meta) (*Result, error) {
	if len(body) == 0 {
		return nil, batchErr(BatchInvalid, "", "body is empty; expected a JSON object with an events array")
	}
	st := v.states.Get().(*batchState)
	defer v.putState(st)
	lay, err := jsonscan.ScanLayout(body, "events", st.evSpans[:0], &st.bodyIndex)
	if err != nil {
		return nil, batchErr(BatchInvalid, "", "body is not valid JSON: "+err.Error())
	}
	if lay.Spans != nil {
		st.evSpans = lay.Spans
	}
	if at := invalidUTF8(body); at >= 0 {
		msg := fmt.Sprintf("body is not valid UTF-8: byte 0x%02x at offset %d", body[at], at)
		if !lay.Escaped {
			msg += inEvent(lay.Spans, at)
		}
		return nil, batchErr(BatchInvalid, "", msg)
	}
	root := body[jsonscan.SkipWS(body, 0):]
	if root[0] != '{' {
		return nil, batchErr(BatchInvalid, "", "body must be a JSON object with an events array, got "+jsonscan.TypeName(root))
	}
	if lay.Escaped {
		lay = rootLayout(body, len(body)-len(root), st)
	}
	switch {
	case lay.Count == 0:
		return nil, batchErr(BatchInvalid, "events", "is required")
	case lay.Count > 1:
		return nil, batchErr(BatchInvalid, "events", "appears more than once in the body")
	case lay.Value[0] != '[':
		return nil, batchErr(BatchInvalid, "events", "must be an array, got "+jsonscan.TypeName(lay.Value))
	case len(lay.Spans) == 0:
		return nil, batchErr(BatchInvalid, "events", "must hold at least 1 event")
	case len(lay.Spans) > v.limits.MaxEvents:
		return nil, batchErr(BatchTooLarge, "events",
			"holds "+strconv.Itoa(len(lay.Spans))+" events; at most "+strconv.Itoa(v.limits.MaxEvents)+" are allowed")
	}
	return v.buildRecords(st, body, lay.Spans, &meta), nil
}

// putState pools st for the next batch, without the record of an
// unusually large body, which would pin its memory.
func (v *Validator) putState(st *batchState) {
	st.bodyIndex.Trim()
	st.payloadIndex.Trim()
	v.states.Put(st)
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// inEvent names the event holding offset at, for error messages, or
// returns "" when at lies outside every event.
func inEvent(spans [][2]int, at int) string {
	i := sort.Search(len(spans), func(i int) bool { return spans[i][1] > at })
	if i < len(spans) && spans[i][0] <= at {
		return " (in events[" + strconv.Itoa(i) + "])"
	}
	return ""
}

// rootLayout finds the events of the root object at body[at:] when its
// keys hold escapes, decoding each key; the scanner compares keys as
// written. Offsets in the layout are into body.
func rootLayout(body []byte, at int, st *batchState) jsonscan.Layout {
	lay := jsonscan.Layout{Spans: st.evSpans[:0]}
	root := body[at : at+jsonscan.SkipValue(&st.bodyIndex, body[at:], 0)]
	m := jsonscan.NewMembers(&st.bodyIndex, root)
	for {
		raw, start, end, ok := m.Next()
		if !ok {
			break
		}
		st.scratch = st.scratch[:0]
		if string(jsonscan.KeyName(raw, &st.scratch)) != "events" {
			continue
		}
		lay.Count++
		if lay.Count > 1 {
			continue
		}
		lay.Value = root[start:end]
		if lay.Value[0] != '[' {
			continue
		}
		elems := jsonscan.NewElements(&st.bodyIndex, lay.Value)
		for {
			s, e, ok := elems.Next()
			if !ok {
				break
			}
			base := at + start
			lay.Spans = append(lay.Spans, [2]int{base + s, base + e})
		}
	}
	st.evSpans = lay.Spans
	return lay
}

// envelopeTail writes the envelope fields shared by every event of a batch.
func envelopeTail(dst []byte, meta *Meta) []byte {
	dst = append(dst, `,"appId":`...)
	dst = jsonscan.AppendString(dst, []byte(meta.AppID))
	dst = append(dst, `,"organizationId":`...)
	dst = jsonscan.AppendString(dst, []byte(meta.OrganizationID))
	dst = append(dst, `,"receivedAt":"`...)
	dst = meta.ReceivedAt.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	return append(dst, '"')
}

// senderTail writes the envelope fields that say who sent the batch, when
// ingest knows: event envelopes carry them, quarantine records do not.
func senderTail(dst []byte, meta *Meta) []byte {
	if meta.TokenID != "" {
		dst = append(dst, `,"tokenId":`...)
		dst = jsonscan.AppendString(dst, []byte(meta.TokenID))
	}
	if meta.ClientNetwork != "" {
		dst = append(dst, `,"clientNetwork":`...)
		dst = jsonscan.AppendString(dst, []byte(meta.ClientNetwork))
	}
	return dst
}

// recordRoom estimates what a record adds to its event: key, envelope and
// a filled-in appId. The buffer grows when a batch needs more.
func recordRoom(meta *Meta, tail []byte) int {
	return 2*len(meta.AppID) + len(tail) + 160
}

// buildRecords checks each event and writes its record: the envelopes of
// valid events first, in batch order, then the quarantine records of the
// others.
func (v *Validator) buildRecords(st *batchState, body []byte, spans [][2]int, meta *Meta) *Result {
	res := &Result{pool: &v.outs}
	st.recs = st.recs[:0]
	var shared, sender [256]byte
	tail := envelopeTail(shared[:0], meta)
	// Event envelopes end with the sender, quarantine records do not.
	evTail := senderTail(append(sender[:0], tail...), meta)

	// Records are written straight into the buffer the Result owns until
	// Release, each key followed by its value; records slice into it.
	res.out = v.outBuf(len(body) + len(spans)*recordRoom(meta, evTail))
	buf, rejected := v.appendEnvelopes(st, res, (*res.out)[:0], body, spans, meta, evTail)
	nAccepted := len(st.recs)
	buf = v.appendQuarantined(st, res, buf, body, spans, rejected, meta, tail)
	*res.out = buf

	recs := make([]Record, len(st.recs))
	from := 0
	for n, s := range st.recs {
		recs[n] = Record{Key: buf[from:s.keyEnd:s.keyEnd], Value: buf[s.keyEnd:s.valEnd:s.valEnd]}
		from = s.valEnd
	}
	res.Accepted = recs[:nAccepted:nAccepted]
	res.Quarantined = recs[nAccepted:]
	return res
}

// appendEnvelopes checks each event and appends the record of each valid
// one to buf, noting its span in st.recs; it returns the indexes of the
// invalid events, whose errors it adds to res.
func (v *Validator) appendEnvelopes(st *batchState, res *Result, buf, body []byte, spans [][2]int, meta *Meta, evTail []byte) ([]byte, []int) {
	var rejected []int
	var idBuf [36]byte
	for i, sp := range spans {
		ev := body[sp[0]:sp[1]]
		p := &st.problems
		p.index, p.errs = i, p.errs[:0]
		st.scratch = st.scratch[:0]
		f, ok := v.checkEvent(p, st, ev, meta)
		if !ok {
			res.Errors = append(res.Errors, p.errs...)
			rejected = append(rejected, i)
			continue
		}
		id := f.eventID
		if id == nil {
			id = eventID(idBuf[:0], meta, i)
		}
		mark := len(buf)
		buf = append(buf, meta.AppID...)
		buf = append(buf, '/')
		if len(f.sessionID) > 0 {
			buf = append(buf, f.sessionID...)
		} else {
			buf = append(buf, id...)
		}
		keyEnd := len(buf)
		buf = append(buf, `{"v":1,"eventId":`...)
		buf = jsonscan.AppendString(buf, id)
		buf = append(buf, evTail...)
		buf = append(buf, `,"event":`...)
		evStart := len(buf)
		buf = appendEvent(buf, ev, &f, meta.AppID)
		if size := len(buf) - evStart; size > v.limits.MaxEventBytes {
			buf = buf[:mark]
			res.Errors = append(res.Errors, FieldError{Index: i, Field: "", Reason: ReasonTooLarge,
				Message: "event is " + strconv.Itoa(size) + " bytes; at most " + strconv.Itoa(v.limits.MaxEventBytes) + " are allowed (MAX_EVENT_BYTES)"})
			rejected = append(rejected, i)
			continue
		}
		buf = append(buf, '}')
		st.recs = append(st.recs, span{keyEnd: keyEnd, valEnd: len(buf)})
	}
	return buf, rejected
}

// appendQuarantined appends the quarantine record of each rejected event
// to buf, with the errors res holds for it, noting its span in st.recs.
func (v *Validator) appendQuarantined(st *batchState, res *Result, buf, body []byte, spans [][2]int, rejected []int, meta *Meta, tail []byte) []byte {
	var idBuf [36]byte
	e := 0
	for _, i := range rejected {
		start := e
		for e < len(res.Errors) && res.Errors[e].Index == i {
			e++
		}
		st.scratch = st.scratch[:0]
		buf = append(buf, meta.AppID...)
		keyEnd := len(buf)
		buf = appendQuarantine(buf, body[spans[i][0]:spans[i][1]], i, res.Errors[start:e], tail, meta, idBuf[:0],
			jsonscan.Walker{Index: &st.bodyIndex, Scratch: &st.scratch}, v.limits.MaxRecordBytes)
		st.recs = append(st.recs, span{keyEnd: keyEnd, valEnd: len(buf)})
	}
	return buf
}

// appendEvent writes the event as sent, with appId added right after the
// opening brace when it was missing, and a REQUEST_RESPONSE payload sent
// as a string replaced by the object the string holds.
func appendEvent(dst, raw []byte, f *eventFields, appID string) []byte {
	from := 0
	if !f.hasAppID {
		dst = append(dst, `{"appId":`...)
		dst = jsonscan.AppendString(dst, []byte(appID))
		from = jsonscan.SkipWS(raw, 1)
		if raw[from] != '}' {
			dst = append(dst, ',')
		}
	}
	if f.inner == nil {
		return append(dst, raw[from:]...)
	}
	dst = append(dst, raw[from:f.payloadStart]...)
	dst = append(dst, f.inner...)
	return append(dst, raw[f.payloadEnd:]...)
}

// appendQuarantine writes the quarantine record of an invalid event, kept
// exactly as it was sent, so that it can be resubmitted once the rule or
// limit it broke has changed. Only an event too large for a record of
// maxRecord bytes is kept in part.
func appendQuarantine(dst, raw []byte, index int, errs []FieldError, tail []byte, meta *Meta, idBuf []byte, w jsonscan.Walker, maxRecord int) []byte {
	mark := len(dst)
	id := eventID(idBuf, meta, index)
	if raw[0] == '{' {
		var vals [1][]byte
		w.Fields(raw, []string{"eventId"}, vals[:])
		if v := vals[0]; v != nil && v[0] == '"' {
			if b := w.String(v); len(b) > 0 && len(b) <= 4*maxEventIDLen {
				id = b
			}
		}
	}
	dst = append(dst, `{"v":1`...)
	dst = append(dst, tail...)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"eventId":`...)
	dst = jsonscan.AppendString(dst, id)
	dst = append(dst, `,"errors":[`...)
	for n, e := range errs {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"field":`...)
		dst = jsonscan.AppendString(dst, []byte(e.Field))
		dst = append(dst, `,"reason":`...)
		dst = jsonscan.AppendString(dst, []byte(e.Reason))
		dst = append(dst, `,"message":`...)
		dst = jsonscan.AppendString(dst, []byte(e.Message))
		dst = append(dst, '}')
	}
	dst = append(dst, `],"event":`...)
	// What the record needs besides the event: the closing brace, or the
	// fields that describe a cut copy.
	const cutFields = len(`,"truncated":true,"size":}`) + 20
	if room := maxRecord - (len(dst) - mark); len(raw)+1 <= room {
		dst = append(dst, raw...)
	} else {
		dst = jsonscan.AppendString(dst, cutEscaped(raw, room-cutFields))
		dst = append(dst, `,"truncated":true,"size":`...)
		dst = strconv.AppendInt(dst, int64(len(raw)), 10)
	}
	return append(dst, '}')
}

// cutEscaped returns the longest prefix of s, ending on a character
// boundary, whose JSON string form (quotes included) fits in room bytes.
func cutEscaped(s []byte, room int) []byte {
	used := 2 // the quotes
	for i := 0; i < len(s); {
		c, size, n := s[i], 1, 1
		switch {
		case c >= utf8.RuneSelf:
			var r rune
			r, size = utf8.DecodeRune(s[i:])
			n = size
			if r == utf8.RuneError && size == 1 {
				n = len(`\ufffd`)
			}
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n = 2
		case c < 0x20:
			n = 6
		}
		if used+n > room {
			return s[:i]
		}
		used += n
		i += size
	}
	return s
}

// eventID returns the ID of the event at index sent without one: the ID
// Meta gives it, or one derived from the batch.
func eventID(dst []byte, meta *Meta, index int) []byte {
	if index < len(meta.EventIDs) && meta.EventIDs[index] != "" {
		return append(dst, meta.EventIDs[index]...)
	}
	return deriveID(dst, meta, index)
}

// deriveID makes the ID of an event sent without one: a UUID-shaped
// 128-bit digest of the app, the batch seed and the event's index, so that a
// retried identical batch yields the same IDs. The hash need not resist
// forgery: only an app's own events share its IDs' inputs.
func deriveID(dst []byte, meta *Meta, index int) []byte {
	var in [512]byte
	b := append(in[:0], meta.AppID...)
	b = append(b, 0)
	b = append(b, meta.IDSeed...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	sum := xxh3.Hash128(b).Bytes()
	sum[6] = sum[6]&0x0f | 0x80 // version 8: custom
	sum[8] = sum[8]&0x3f | 0x80 // RFC 4122 variant
	var out [36]byte
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return append(dst, out[:]...)
}
