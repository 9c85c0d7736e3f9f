package knowledge

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// AppendJSON appends r to dst as encoding/json would write it. A search
// answers ten whole documents; their text is escaped once, when the base
// is built, instead of on every answer.
func (r SearchResult) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"documents":`...)
	if r.Documents == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
	}
	for i := range r.Documents {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.Documents[i].appendJSON(dst)
		dst = append(dst, '}')
	}
	if r.Documents != nil {
		dst = append(dst, ']')
	}
	dst = append(dst, `,"suggested":`...)
	if r.Suggested == nil {
		return append(dst, "null}"...)
	}
	dst = append(dst, '[')
	for i := range r.Suggested {
		s := &r.Suggested[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = s.Document.appendJSON(dst)
		if s.TopAnswer != "" {
			dst = append(dst, `,"topAnswer":`...)
			dst = appendString(dst, s.TopAnswer)
		}
		dst = append(dst, `,"matchConfidence":`...)
		dst = appendFloat(dst, s.MatchConfidence)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendJSON appends d's fields after an opening brace, leaving the
// object open for an embedding type's fields.
func (d *Document) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if d.head != "" {
		dst = append(dst, d.head...)
	} else {
		dst = appendHead(dst, d.Title, d.URI, d.Document)
	}
	dst = append(dst, `,"highlights":`...)
	if d.Highlights == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, h := range d.Highlights {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"beginOffset":`...)
			dst = strconv.AppendInt(dst, int64(h.BeginOffset), 10)
			dst = append(dst, `,"endOffset":`...)
			dst = strconv.AppendInt(dst, int64(h.EndOffset), 10)
			if h.TopAnswer {
				dst = append(dst, `,"topAnswer":true`...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(d.Attributes) > 0 {
		dst = append(dst, `,"attributes":{`...)
		keys := make([]string, 0, len(d.Attributes))
		for k := range d.Attributes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, d.Attributes[k])
		}
		dst = append(dst, '}')
	}
	return dst
}

// appendHead appends a Document's title, uri and document fields.
func appendHead(dst []byte, title, uri, text string) []byte {
	if title != "" {
		dst = append(dst, `"title":`...)
		dst = appendString(dst, title)
		dst = append(dst, ',')
	}
	if uri != "" {
		dst = append(dst, `"uri":`...)
		dst = appendString(dst, uri)
		dst = append(dst, ',')
	}
	dst = append(dst, `"document":`...)
	return appendString(dst, text)
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it.
func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}

// appendFloat appends f as encoding/json writes it.
func appendFloat(dst []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) || math.IsNaN(f) || math.IsInf(f, 0) {
		b, _ := json.Marshal(f) // exponent forms; NaN and infinities fail as they would there
		return append(dst, b...)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}
