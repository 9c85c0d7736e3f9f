package event

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Caps on the event's own string fields, in Unicode code points. The JSON
// Schemas state the same numbers.
const (
	maxNameLen    = 256
	maxAppIDLen   = 128
	maxEventIDLen = 128
	maxIDLen      = 256 // sessionId, userId, selectedHandler
	maxSourceLen  = 128 // channel, platform
)

// nameRequestResponse is the event name whose payload has a required shape.
const nameRequestResponse = "REQUEST_RESPONSE"

// eventFields are the parts of a valid event the envelope needs.
type eventFields struct {
	appID     []byte
	hasAppID  bool
	eventID   []byte
	sessionID []byte
	name      []byte
	payload   *fastjson.Value
	// normalized is set when a payload sent as a string was parsed, so the
	// event must be re-encoded rather than copied.
	normalized bool
}

// problems collects the errors of one event.
type problems struct {
	index int
	errs  []FieldError
}

func (p *problems) add(field, msg string) {
	p.errs = append(p.errs, FieldError{Index: p.index, Field: field, Message: msg})
}

func typeName(v *fastjson.Value) string {
	switch v.Type() {
	case fastjson.TypeObject:
		return "object"
	case fastjson.TypeArray:
		return "array"
	case fastjson.TypeString:
		return "string"
	case fastjson.TypeNumber:
		return "number"
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return "boolean"
	default:
		return "null"
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
// bytes. nullable admits JSON null, which then counts as absent.
func checkString(p *problems, field string, v *fastjson.Value, max int, nullable, nonEmpty bool) []byte {
	t := v.Type()
	if t == fastjson.TypeNull && nullable {
		return nil
	}
	if t != fastjson.TypeString {
		want := "a string"
		if nullable {
			want = "a string or null"
		}
		p.add(field, "must be "+want+", got "+typeName(v))
		return nil
	}
	b, _ := v.StringBytes()
	if nonEmpty && len(b) == 0 {
		p.add(field, "must not be empty")
		return nil
	}
	if len(b) > max { // a code point is at least one byte
		if n := utf8.RuneCount(b); n > max {
			p.add(field, "must be at most "+strconv.Itoa(max)+" characters, got "+strconv.Itoa(n))
			return nil
		}
	}
	return b
}

// dupMessage reports a checked key that appears twice in one object.
// Parsers disagree on which copy counts, so such an event is refused
// rather than checked one way here and read another way downstream. Keys
// that are not checked are kept as sent, duplicates included.
const dupMessage = "appears more than once in its object"

// fields looks up keys in obj in one pass, filling vals (which must be as
// long as keys), and returns the first key that appears twice.
func fields(obj *fastjson.Value, keys []string, vals []*fastjson.Value) (dup string) {
	o, _ := obj.Object()
	o.Visit(func(k []byte, v *fastjson.Value) {
		for i, name := range keys {
			if string(k) == name {
				if vals[i] != nil && dup == "" {
					dup = name
				}
				vals[i] = v
				return
			}
		}
	})
	return dup
}

// checkOpt checks a nested field that may be absent, null or of the wanted
// type. The field path is only built when there is an error to report.
func checkOpt(p *problems, prefix, key string, v *fastjson.Value, want fastjson.Type) {
	if !wrongType(v, want) {
		return
	}
	name := "a string"
	if want == fastjson.TypeNumber {
		name = "a number"
	}
	p.add(prefix+"."+key, "must be "+name+" or null, got "+typeName(v))
}

// checkEvent validates one event and returns what the envelope needs.
func (v *Validator) checkEvent(p *problems, st *batchState, ev *fastjson.Value, meta *Meta) (eventFields, bool) {
	var f eventFields
	if ev.Type() != fastjson.TypeObject {
		p.add("", "event must be a JSON object, got "+typeName(ev))
		return f, false
	}
	obj, _ := ev.Object()
	var typ, name, payload *fastjson.Value
	var seen uint16
	dup := ""
	obj.Visit(func(k []byte, val *fastjson.Value) {
		bit := uint16(0)
		switch string(k) {
		case "type":
			bit = 1 << 0
			typ = val
		case "name":
			bit = 1 << 1
			name = val
		case "appId":
			bit = 1 << 2
			f.hasAppID = true
			f.appID = checkString(p, "appId", val, maxAppIDLen, false, true)
		case "eventId":
			bit = 1 << 3
			f.eventID = checkString(p, "eventId", val, maxEventIDLen, false, true)
		case "sessionId":
			bit = 1 << 4
			f.sessionID = checkString(p, "sessionId", val, maxIDLen, true, false)
		case "userId":
			bit = 1 << 5
			checkString(p, "userId", val, maxIDLen, true, false)
		case "channel":
			bit = 1 << 6
			checkString(p, "channel", val, maxSourceLen, true, false)
		case "platform":
			bit = 1 << 7
			checkString(p, "platform", val, maxSourceLen, true, false)
		case "selectedHandler":
			bit = 1 << 8
			checkString(p, "selectedHandler", val, maxIDLen, true, false)
		case "payload":
			bit = 1 << 9
			payload = val
		}
		if seen&bit != 0 && dup == "" {
			dup = string(k)
		}
		seen |= bit
	})
	if dup != "" {
		p.add(dup, dupMessage)
		return f, false
	}

	switch {
	case typ == nil:
		p.add("type", "is required")
	case typ.Type() != fastjson.TypeString:
		p.add("type", "must be a string, got "+typeName(typ))
	default:
		if b, _ := typ.StringBytes(); !v.typeAllowed(b) {
			p.add("type", "must be one of "+v.typeList+"; got "+quote(b))
		}
	}
	if name == nil {
		p.add("name", "is required")
	} else {
		f.name = checkString(p, "name", name, maxNameLen, false, true)
	}
	if f.hasAppID && f.appID != nil && string(f.appID) != meta.AppID {
		p.add("appId", "must be the token's app "+strconv.Quote(meta.AppID)+", got "+quote(f.appID))
	}
	f.payload = payload
	if string(f.name) == nameRequestResponse {
		f.normalized = payload != nil && payload.Type() == fastjson.TypeString
		f.payload = checkRequestResponse(p, &st.payloadParser, payload)
	}
	return f, len(p.errs) == 0
}

func (v *Validator) typeAllowed(b []byte) bool {
	for _, t := range v.types {
		if t == string(b) {
			return true
		}
	}
	return false
}

// checkRequestResponse validates a REQUEST_RESPONSE payload and returns it
// as an object: a payload sent as a string holding JSON is parsed.
func checkRequestResponse(p *problems, parser *fastjson.Parser, payload *fastjson.Value) *fastjson.Value {
	const field = "payload"
	if payload == nil {
		p.add(field, "is required for REQUEST_RESPONSE events")
		return nil
	}
	switch payload.Type() {
	case fastjson.TypeObject:
	case fastjson.TypeString:
		s, _ := payload.StringBytes()
		if err := strictJSON(s); err != nil {
			p.add(field, "must be an object or a string holding a JSON object; the string is not valid JSON: "+err.Error())
			return nil
		}
		inner, err := parser.ParseBytes(s)
		if err != nil {
			p.add(field, "must be an object or a string holding a JSON object; the string is not valid JSON: "+err.Error())
			return nil
		}
		if inner.Type() != fastjson.TypeObject {
			p.add(field, "must be an object or a string holding a JSON object, got a string holding "+typeName(inner))
			return nil
		}
		payload = inner
	default:
		p.add(field, "must be an object or a string holding a JSON object, got "+typeName(payload))
		return nil
	}

	var top [3]*fastjson.Value
	if d := fields(payload, []string{"request", "response", "tag"}, top[:]); d != "" {
		p.add("payload."+d, dupMessage)
		return nil
	}
	req, resp := top[0], top[1]
	for i, part := range [...]string{"request", "response"} {
		if top[i] == nil {
			p.add("payload."+part, "is required")
		} else if top[i].Type() != fastjson.TypeObject {
			p.add("payload."+part, "must be an object, got "+typeName(top[i]))
		}
	}
	checkOpt(p, "payload", "tag", top[2], fastjson.TypeString)

	if req != nil && req.Type() == fastjson.TypeObject {
		keys := []string{"type", "intentId", "rawQuery", "sessionId", "userId", "matchConfidence"}
		var vals [6]*fastjson.Value
		if d := fields(req, keys, vals[:]); d != "" {
			p.add("payload.request."+d, dupMessage)
		}
		for i, k := range keys[:5] {
			checkOpt(p, "payload.request", k, vals[i], fastjson.TypeString)
		}
		checkOpt(p, "payload.request", "matchConfidence", vals[5], fastjson.TypeNumber)
	}
	if resp != nil && resp.Type() == fastjson.TypeObject {
		var vals [3]*fastjson.Value
		if d := fields(resp, []string{"outputSpeech", "reprompt", "displays"}, vals[:]); d != "" {
			p.add("payload.response."+d, dupMessage)
		}
		checkSpeech(p, "payload.response.outputSpeech", vals[0])
		checkSpeech(p, "payload.response.reprompt", vals[1])
		checkDisplays(p, vals[2])
	}
	return payload
}

// checkSpeech checks outputSpeech or reprompt: a plain string, or an object
// with string displayText and ssml.
func checkSpeech(p *problems, field string, v *fastjson.Value) {
	if v == nil {
		return
	}
	switch v.Type() {
	case fastjson.TypeNull, fastjson.TypeString:
	case fastjson.TypeObject:
		var vals [2]*fastjson.Value
		if d := fields(v, []string{"displayText", "ssml"}, vals[:]); d != "" {
			p.add(field+"."+d, dupMessage)
		}
		checkOpt(p, field, "displayText", vals[0], fastjson.TypeString)
		checkOpt(p, field, "ssml", vals[1], fastjson.TypeString)
	default:
		p.add(field, "must be a string, an object or null, got "+typeName(v))
	}
}

func checkDisplays(p *problems, v *fastjson.Value) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return
	}
	displays, err := v.Array()
	if err != nil {
		p.add(displayPath(-1, -1), "must be an array or null, got "+typeName(v))
		return
	}
	for i, d := range displays {
		if d.Type() != fastjson.TypeObject {
			p.add(displayPath(i, -1), "must be an object, got "+typeName(d))
			continue
		}
		var dv [3]*fastjson.Value
		if key := fields(d, []string{"type", "title", "items"}, dv[:]); key != "" {
			p.add(displayPath(i, -1)+"."+key, dupMessage)
		}
		for n, k := range [...]string{"type", "title"} {
			if wrongType(dv[n], fastjson.TypeString) {
				p.add(displayPath(i, -1)+"."+k, "must be a string or null, got "+typeName(dv[n]))
			}
		}
		items := dv[2]
		if items == nil || items.Type() == fastjson.TypeNull {
			continue
		}
		list, err := items.Array()
		if err != nil {
			p.add(displayPath(i, -1)+".items", "must be an array or null, got "+typeName(items))
			continue
		}
		for j, it := range list {
			if it.Type() != fastjson.TypeObject {
				p.add(displayPath(i, j), "must be an object, got "+typeName(it))
				continue
			}
			keys := [...]string{"title", "token", "description"}
			var iv [3]*fastjson.Value
			if key := fields(it, keys[:], iv[:]); key != "" {
				p.add(displayPath(i, j)+"."+key, dupMessage)
			}
			for n, k := range keys {
				if wrongType(iv[n], fastjson.TypeString) {
					p.add(displayPath(i, j)+"."+k, "must be a string or null, got "+typeName(iv[n]))
				}
			}
		}
	}
}

// wrongType reports whether v is present, not null and not of type want.
func wrongType(v *fastjson.Value, want fastjson.Type) bool {
	if v == nil {
		return false
	}
	t := v.Type()
	return t != fastjson.TypeNull && t != want
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
