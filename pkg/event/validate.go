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

// checkOptional checks obj.key, which may be absent, null or of the wanted
// type. The field path is only built when there is an error to report.
func checkOptional(p *problems, prefix string, obj *fastjson.Value, key string, want fastjson.Type) {
	bad := wrongOptional(obj, key, want)
	if bad == nil {
		return
	}
	name := "a string"
	if want == fastjson.TypeNumber {
		name = "a number"
	}
	p.add(prefix+"."+key, "must be "+name+" or null, got "+typeName(bad))
}

// checkEvent validates one event and returns what the envelope needs.
func (v *Validator) checkEvent(p *problems, st *batchState, ev *fastjson.Value, meta *Meta) (eventFields, bool) {
	var f eventFields
	if ev.Type() != fastjson.TypeObject {
		p.add("", "event must be a JSON object, got "+typeName(ev))
		return f, false
	}
	obj, _ := ev.Object()
	if path, dup := duplicateKey(ev, &st.keys2); dup {
		p.add(path, "appears more than once in its object")
		return f, false
	}
	var typ, name, payload *fastjson.Value
	obj.Visit(func(k []byte, val *fastjson.Value) {
		switch string(k) {
		case "type":
			typ = val
		case "name":
			name = val
		case "appId":
			f.hasAppID = true
			f.appID = checkString(p, "appId", val, maxAppIDLen, false, true)
		case "eventId":
			f.eventID = checkString(p, "eventId", val, maxEventIDLen, false, true)
		case "sessionId":
			f.sessionID = checkString(p, "sessionId", val, maxIDLen, true, false)
		case "userId":
			checkString(p, "userId", val, maxIDLen, true, false)
		case "channel":
			checkString(p, "channel", val, maxSourceLen, true, false)
		case "platform":
			checkString(p, "platform", val, maxSourceLen, true, false)
		case "selectedHandler":
			checkString(p, "selectedHandler", val, maxIDLen, true, false)
		case "payload":
			payload = val
		}
	})

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

	for _, part := range [...]string{"request", "response"} {
		if pv := payload.Get(part); pv == nil {
			p.add("payload."+part, "is required")
		} else if pv.Type() != fastjson.TypeObject {
			p.add("payload."+part, "must be an object, got "+typeName(pv))
		}
	}
	checkOptional(p, "payload", payload, "tag", fastjson.TypeString)

	if req := payload.Get("request"); req != nil && req.Type() == fastjson.TypeObject {
		for _, k := range [...]string{"type", "intentId", "rawQuery", "sessionId", "userId"} {
			checkOptional(p, "payload.request", req, k, fastjson.TypeString)
		}
		checkOptional(p, "payload.request", req, "matchConfidence", fastjson.TypeNumber)
	}
	if resp := payload.Get("response"); resp != nil && resp.Type() == fastjson.TypeObject {
		checkSpeech(p, "payload.response.outputSpeech", resp.Get("outputSpeech"))
		checkSpeech(p, "payload.response.reprompt", resp.Get("reprompt"))
		checkDisplays(p, resp.Get("displays"))
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
		checkOptional(p, field, v, "displayText", fastjson.TypeString)
		checkOptional(p, field, v, "ssml", fastjson.TypeString)
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
		for _, k := range [...]string{"type", "title"} {
			if bad := wrongOptional(d, k, fastjson.TypeString); bad != nil {
				p.add(displayPath(i, -1)+"."+k, "must be a string or null, got "+typeName(bad))
			}
		}
		items := d.Get("items")
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
			for _, k := range [...]string{"title", "token", "description"} {
				if bad := wrongOptional(it, k, fastjson.TypeString); bad != nil {
					p.add(displayPath(i, j)+"."+k, "must be a string or null, got "+typeName(bad))
				}
			}
		}
	}
}

// wrongOptional returns obj.key when it is present, not null and not of the
// wanted type.
func wrongOptional(obj *fastjson.Value, key string, want fastjson.Type) *fastjson.Value {
	v := obj.Get(key)
	if v == nil {
		return nil
	}
	if t := v.Type(); t == fastjson.TypeNull || t == want {
		return nil
	}
	return v
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
