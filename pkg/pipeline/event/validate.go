package event

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

// Caps on the event's own string fields, in Unicode code points. The JSON
// Schemas state the same numbers.
const (
	maxNameLen    = 256
	maxTypeLen    = 128
	maxAppIDLen   = 128
	maxEventIDLen = 128
	maxIDLen      = 256 // sessionId, userId, selectedHandler
	maxSourceLen  = 128 // channel, platform
)

// NameRequestResponse is the event name whose payload has a required
// shape: a request and a response.
const NameRequestResponse = "REQUEST_RESPONSE"

// dupMessage reports a checked key that appears twice in one object.
// Parsers disagree on which copy counts, so such an event is refused
// rather than checked one way here and read another way downstream. Keys
// that are not checked are kept as sent, duplicates included.
const dupMessage = "appears more than once in its object"

// The event's own keys, in the order of eventFields' lookups.
const (
	kType = iota
	kName
	kAppID
	kEventID
	kSessionID
	kUserID
	kChannel
	kPlatform
	kSelectedHandler
	kPayload
	nEventKeys
)

func eventKey(name []byte) int {
	switch string(name) {
	case "type":
		return kType
	case "name":
		return kName
	case "appId":
		return kAppID
	case "eventId":
		return kEventID
	case "sessionId":
		return kSessionID
	case "userId":
		return kUserID
	case "channel":
		return kChannel
	case "platform":
		return kPlatform
	case "selectedHandler":
		return kSelectedHandler
	case "payload":
		return kPayload
	}
	return -1
}

// eventFields are the parts of a valid event the envelope needs.
type eventFields struct {
	appID     []byte
	hasAppID  bool
	eventID   []byte
	sessionID []byte
	name      []byte
	// inner is set when a REQUEST_RESPONSE payload came as a string holding
	// JSON: the object it holds replaces the payload value, which sits at
	// payloadStart:payloadEnd in the event.
	inner                    []byte
	payloadStart, payloadEnd int
}

// maxEventErrors bounds the errors listed for one event. Without a bound,
// an event with thousands of faulty display items would yield a response
// and a quarantine record many times its own size, the record too large
// for the broker to take.
const maxEventErrors = 20

// problems collects the errors of one event.
type problems struct {
	index int
	errs  []FieldError
}

func (p *problems) add(reason, field, msg string) {
	switch n := len(p.errs); {
	case n < maxEventErrors:
		p.errs = append(p.errs, FieldError{Index: p.index, Field: field, Reason: reason, Message: msg})
	case n == maxEventErrors:
		p.errs = append(p.errs, FieldError{Index: p.index, Field: "", Reason: ReasonMoreErrors,
			Message: "the event has more problems; only the first " + strconv.Itoa(maxEventErrors) + " are listed"})
	}
}

// quote renders a value for an error message, shortened so that a huge
// input does not make a huge response.
func quote(b []byte) string {
	const max = 64
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strconv.Quote(string(b[:cut])) + "..."
	}
	return strconv.Quote(string(b))
}

// checkString checks a string field with a length cap and returns its
// decoded bytes. nullable admits JSON null, which then counts as absent.
func checkString(p *problems, field string, v []byte, max int, nullable, nonEmpty bool, scratch *[]byte) []byte {
	if v[0] == 'n' && nullable {
		return nil
	}
	if v[0] != '"' {
		want := "a string"
		if nullable {
			want = "a string or null"
		}
		p.add(ReasonWrongType, field, "must be "+want+", got "+jsonscan.TypeName(v))
		return nil
	}
	b := jsonscan.StringValue(v, scratch)
	if nonEmpty && len(b) == 0 {
		p.add(ReasonInvalid, field, "must not be empty")
		return nil
	}
	if len(b) > max { // a code point is at least one byte
		if n := utf8.RuneCount(b); n > max {
			p.add(ReasonTooLong, field, "must be at most "+strconv.Itoa(max)+" characters, got "+strconv.Itoa(n))
			return nil
		}
	}
	return b
}

// wrongType reports whether v is present, not null and not of the type
// whose values start with want ('"' string, '{' object, '0' number).
func wrongType(v []byte, want byte) bool {
	if v == nil || v[0] == 'n' {
		return false
	}
	if want == '0' {
		return !jsonscan.IsNumber(v)
	}
	return v[0] != want
}

// checkOpt checks a nested field that may be absent, null or of the wanted
// type. The field path is only built when there is an error to report.
func checkOpt(p *problems, prefix, key string, v []byte, want byte) {
	if !wrongType(v, want) {
		return
	}
	name := "a string"
	if want == '0' {
		name = "a number"
	}
	p.add(ReasonWrongType, prefix+"."+key, "must be "+name+" or null, got "+jsonscan.TypeName(v))
}

// checkEvent validates one event and returns what the envelope needs.
func (v *Validator) checkEvent(p *problems, st *batchState, ev []byte, meta *Meta) (eventFields, bool) {
	var f eventFields
	if ev[0] != '{' {
		p.add(ReasonNotObject, "", "event must be a JSON object, got "+jsonscan.TypeName(ev))
		return f, false
	}
	var vals [nEventKeys][]byte
	m := jsonscan.NewMembers(&st.bodyIndex, ev)
	for {
		raw, start, end, ok := m.Next()
		if !ok {
			break
		}
		name := raw
		if !m.Plain() {
			name = jsonscan.KeyName(raw, &st.scratch)
		}
		k := eventKey(name)
		if k < 0 {
			continue
		}
		if vals[k] != nil {
			p.add(ReasonDuplicateKey, string(name), dupMessage)
			return f, false
		}
		vals[k] = ev[start:end]
		if k == kPayload {
			f.payloadStart, f.payloadEnd = start, end
		}
	}

	sc := &st.scratch
	if vals[kType] == nil {
		p.add(ReasonMissing, "type", "is required")
	} else if b := checkString(p, "type", vals[kType], maxTypeLen, false, true, sc); b != nil && !v.typeAllowed(b) {
		p.add(ReasonTypeNotAllowed, "type", "must be one of "+v.typeList+" (this server's allow-list); got "+quote(b))
	}
	// The reference client sends an empty name for a message whose text
	// starts with a colon; it is stored as sent.
	if vals[kName] == nil {
		p.add(ReasonMissing, "name", "is required")
	} else {
		f.name = checkString(p, "name", vals[kName], maxNameLen, false, false, sc)
	}
	if a := vals[kAppID]; a != nil {
		f.hasAppID = true
		f.appID = checkString(p, "appId", a, maxAppIDLen, false, true, sc)
		if f.appID != nil && string(f.appID) != meta.AppID {
			p.add(ReasonAppMismatch, "appId", "must be the token's app "+strconv.Quote(meta.AppID)+", got "+quote(f.appID))
		}
	}
	if e := vals[kEventID]; e != nil {
		f.eventID = checkString(p, "eventId", e, maxEventIDLen, false, true, sc)
	}
	if s := vals[kSessionID]; s != nil {
		f.sessionID = checkString(p, "sessionId", s, maxIDLen, true, false, sc)
	}
	for _, o := range [...]struct {
		k   int
		key string
		max int
	}{{kUserID, "userId", maxIDLen}, {kChannel, "channel", maxSourceLen}, {kPlatform, "platform", maxSourceLen}, {kSelectedHandler, "selectedHandler", maxIDLen}} {
		if val := vals[o.k]; val != nil {
			checkString(p, o.key, val, o.max, true, false, sc)
		}
	}
	if string(f.name) == NameRequestResponse {
		payload := vals[kPayload]
		obj := checkRequestResponse(p, payload, jsonscan.Walker{Index: &st.bodyIndex, Scratch: sc}, &st.payloadIndex)
		if obj != nil && payload[0] == '"' {
			f.inner = obj
		}
	}
	return f, len(p.errs) == 0
}

func (v *Validator) typeAllowed(b []byte) bool {
	if len(v.types) == 0 {
		return true
	}
	for _, t := range v.types {
		if t == string(b) {
			return true
		}
	}
	return false
}

// checkRequestResponse validates a REQUEST_RESPONSE payload and returns the
// object it is or, for a string holding JSON, the object the string holds;
// inner records the containers of such a string.
func checkRequestResponse(p *problems, payload []byte, w jsonscan.Walker, inner *jsonscan.Index) []byte {
	const field = "payload"
	if payload == nil {
		p.add(ReasonMissing, field, "is required for REQUEST_RESPONSE events")
		return nil
	}
	obj := payload
	switch payload[0] {
	case '{':
	case '"':
		s := w.String(payload)
		if err := jsonscan.Check(s, inner); err != nil {
			p.add(ReasonInvalid, field, "must be an object or a string holding a JSON object; the string is not valid JSON: "+err.Error())
			return nil
		}
		if !utf8.Valid(s) {
			p.add(ReasonInvalid, field, "must be an object or a string holding a JSON object; the string holds invalid UTF-8")
			return nil
		}
		w.Index = inner
		obj = s[jsonscan.SkipWS(s, 0):]
		obj = obj[:jsonscan.SkipValue(w.Index, obj, 0)]
		if obj[0] != '{' {
			p.add(ReasonWrongType, field, "must be an object or a string holding a JSON object, got a string holding "+jsonscan.TypeName(obj))
			return nil
		}
	default:
		p.add(ReasonWrongType, field, "must be an object or a string holding a JSON object, got "+jsonscan.TypeName(payload))
		return nil
	}

	var top [3][]byte
	if d := w.Fields(obj, []string{"request", "response", "tag"}, top[:]); d != "" {
		p.add(ReasonDuplicateKey, "payload."+d, dupMessage)
		return nil
	}
	req, resp := top[0], top[1]
	for i, part := range [...]string{"request", "response"} {
		if top[i] == nil {
			p.add(ReasonMissing, "payload."+part, "is required")
		} else if top[i][0] != '{' {
			p.add(ReasonWrongType, "payload."+part, "must be an object, got "+jsonscan.TypeName(top[i]))
		}
	}
	checkTag(p, w, top[2])

	if req != nil && req[0] == '{' {
		keys := []string{"type", "intentId", "rawQuery", "sessionId", "userId", "matchConfidence"}
		var vals [6][]byte
		if d := w.Fields(req, keys, vals[:]); d != "" {
			p.add(ReasonDuplicateKey, "payload.request."+d, dupMessage)
		}
		for i, k := range keys[:5] {
			checkOpt(p, "payload.request", k, vals[i], '"')
		}
		checkOpt(p, "payload.request", "matchConfidence", vals[5], '0')
		if c := vals[5]; c != nil && jsonscan.IsNumber(c) && !fitsFloat32(c) {
			p.add(ReasonInvalid, "payload.request.matchConfidence", "must be a number a 32-bit float can hold (magnitude at most 3.4028235e38), got "+quote(c))
		}
	}
	if resp != nil && resp[0] == '{' {
		var vals [3][]byte
		if d := w.Fields(resp, []string{"outputSpeech", "reprompt", "displays"}, vals[:]); d != "" {
			p.add(ReasonDuplicateKey, "payload.response."+d, dupMessage)
		}
		checkSpeech(p, w, "payload.response.outputSpeech", vals[0])
		checkSpeech(p, w, "payload.response.reprompt", vals[1])
		checkDisplays(p, w, vals[2])
	}
	return obj
}

// fitsFloat32 reports whether the JSON number v is within the range of a
// 32-bit float, the type the consumer stores matchConfidence as: a value
// beyond it would be lost there silently.
func fitsFloat32(v []byte) bool {
	// Short plain numbers, the usual case, cannot overflow; skip the parse.
	if len(v) < 39 && !bytes.ContainsAny(v, "eE") {
		return true
	}
	_, err := strconv.ParseFloat(string(v), 32)
	return err == nil
}

// checkSpeech checks outputSpeech or reprompt: a plain string, or an object
// with string displayText and ssml.
func checkSpeech(p *problems, w jsonscan.Walker, field string, v []byte) {
	if v == nil {
		return
	}
	switch v[0] {
	case 'n', '"':
	case '{':
		var vals [2][]byte
		if d := w.Fields(v, []string{"displayText", "ssml"}, vals[:]); d != "" {
			p.add(ReasonDuplicateKey, field+"."+d, dupMessage)
		}
		checkOpt(p, field, "displayText", vals[0], '"')
		checkOpt(p, field, "ssml", vals[1], '"')
	default:
		p.add(ReasonWrongType, field, "must be a string, an object or null, got "+jsonscan.TypeName(v))
	}
}

func checkDisplays(p *problems, w jsonscan.Walker, v []byte) {
	if v == nil || v[0] == 'n' {
		return
	}
	if v[0] != '[' {
		p.add(ReasonWrongType, displayPath(-1, -1), "must be an array or null, got "+jsonscan.TypeName(v))
		return
	}
	displays := w.Elements(v)
	for i := 0; ; i++ {
		start, end, ok := displays.Next()
		if !ok {
			return
		}
		d := v[start:end]
		if d[0] != '{' {
			p.add(ReasonWrongType, displayPath(i, -1), "must be an object, got "+jsonscan.TypeName(d))
			continue
		}
		var dv [3][]byte
		if key := w.Fields(d, []string{"type", "title", "items"}, dv[:]); key != "" {
			p.add(ReasonDuplicateKey, displayPath(i, -1)+"."+key, dupMessage)
		}
		for n, k := range [...]string{"type", "title"} {
			if wrongType(dv[n], '"') {
				p.add(ReasonWrongType, displayPath(i, -1)+"."+k, "must be a string or null, got "+jsonscan.TypeName(dv[n]))
			}
		}
		items := dv[2]
		if items == nil || items[0] == 'n' {
			continue
		}
		if items[0] != '[' {
			p.add(ReasonWrongType, displayPath(i, -1)+".items", "must be an array or null, got "+jsonscan.TypeName(items))
			continue
		}
		list := w.Elements(items)
		for j := 0; ; j++ {
			start, end, ok := list.Next()
			if !ok {
				break
			}
			it := items[start:end]
			if it[0] != '{' {
				p.add(ReasonWrongType, displayPath(i, j), "must be an object, got "+jsonscan.TypeName(it))
				continue
			}
			keys := [...]string{"title", "token", "description"}
			var iv [3][]byte
			if key := w.Fields(it, keys[:], iv[:]); key != "" {
				p.add(ReasonDuplicateKey, displayPath(i, j)+"."+key, dupMessage)
			}
			for n, k := range keys {
				if wrongType(iv[n], '"') {
					p.add(ReasonWrongType, displayPath(i, j)+"."+k, "must be a string or null, got "+jsonscan.TypeName(iv[n]))
				}
			}
		}
	}
}

// checkTag checks the payload's tag: a string, as the interface has it, or
// an array of strings, as the reference client's responses carry it.
func checkTag(p *problems, w jsonscan.Walker, v []byte) {
	if v == nil || v[0] == 'n' || v[0] == '"' {
		return
	}
	if v[0] != '[' {
		p.add(ReasonWrongType, "payload.tag", "must be a string, an array of strings or null, got "+jsonscan.TypeName(v))
		return
	}
	tags := w.Elements(v)
	for i := 0; ; i++ {
		start, end, ok := tags.Next()
		if !ok {
			return
		}
		if v[start] != '"' {
			p.add(ReasonWrongType, "payload.tag["+strconv.Itoa(i)+"]", "must be a string, got "+jsonscan.TypeName(v[start:end]))
		}
	}
}

// displayPath names a display (i >= 0) or one of its items (j >= 0); it is
// built only when there is an error to report.
func displayPath(i, j int) string {
	path := "payload.response.displays"
	if i >= 0 {
		path += "[" + strconv.Itoa(i) + "]"
	}
	if j >= 0 {
		path += ".items[" + strconv.Itoa(j) + "]"
	}
	return path
}

func joinTypes(types []string) string {
	q := make([]string, len(types))
	for i, t := range types {
		q[i] = strconv.Quote(t)
	}
	return strings.Join(q, ", ")
}
