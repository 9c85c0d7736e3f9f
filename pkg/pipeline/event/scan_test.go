package event

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestScanAgreesWithStdlib(t *testing.T) {
	cases := []string{
		`{}`, `[]`, `1`, `-0`, `-0.5e+10`, `"x"`, `true`, `null`, ` {"a" : [1, 2.5, "x", {"b": null}] } `,
		`01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `NaN`, `Infinity`, `tru`, `nul`, `[1,]`, `{"a":1,}`, `{"a"}`,
		`{"a":1 "b":2}`, `[1 2]`, `{1:2}`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\ud800"`, "\"a\x01\"", "\"a\\n\x01\"",
		"\"tab\there\"", `"unterminated`, `[`, `{"a":`, `[1]]`, `{}{}`, "\x00", ``, ` `, `"\/\b\f\n\r\t\"\\"`,
		`{"events":[{"a":"` + strings.Repeat(`\"`, 10) + `"}]}`, `[1e5, 1E-5, 0.0, -12.34e+56]`,
	}
	for _, c := range cases {
		got := strictJSON([]byte(c), nil) == nil
		if want := json.Valid([]byte(c)); got != want {
			t.Errorf("%q: scanner says valid=%v, encoding/json says %v", c, got, want)
		}
	}
}

// FuzzScanAgreesWithStdlib checks the scanner against encoding/json on
// UTF-8 input within the depth limit, and checks the spans it reports.
func FuzzScanAgreesWithStdlib(f *testing.F) {
	for _, s := range []string{`{"events":[{"a":1},2,"x"]}`, `[1,{"b":[true,null]}]`, `"\u00e9\n"`, `-1.5e3`, `{"events":[],"x":[[1],[2]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ct containers
		lay, err := scanLayout(b, nil, &ct)
		if err != nil && strings.Contains(err.Error(), "deeper than") {
			return
		}
		if err == nil {
			// Every recorded container ends where reading it byte by byte
			// does, and holds the children reading it finds.
			for _, c := range ct.conts {
				open := int(c.open)
				if got := skipValue(nil, b, open); got != int(c.close) {
					t.Fatalf("%q: container at %d ends at %d, recorded %d", b, open, got, c.close)
				}
				if got := skipValue(&ct, b[open:], 0); got != int(c.close)-open {
					t.Fatalf("%q: lookup from a sub-slice at %d gives %d", b, open, got)
				}
				if got, want := children(&ct, b[open:c.close]), children(nil, b[open:c.close]); !slices.Equal(got, want) {
					t.Fatalf("%q: container at %d has children %q recorded, %q read", b, open, got, want)
				}
			}
		}
		if (err == nil) != json.Valid(b) {
			t.Fatalf("%q: scanner err=%v, encoding/json valid=%v", b, err, json.Valid(b))
		}
		if err != nil || lay.escaped || lay.events == nil || lay.events[0] != '[' {
			return
		}
		spans := lay.spans
		var doc struct{ Events []json.RawMessage }
		if json.Unmarshal(b, &doc) != nil {
			return // not an object with an events array, or invalid UTF-8 decoding quirks
		}
		if len(doc.Events) != len(spans) {
			t.Fatalf("%q: %d spans, %d events", b, len(spans), len(doc.Events))
		}
		for i, s := range spans {
			if !json.Valid(b[s[0]:s[1]]) {
				t.Fatalf("%q: span %d %q is not a JSON value", b, i, b[s[0]:s[1]])
			}
		}
	})
}

// children lists the keys and values of an object's members, or the
// elements of an array, as the walker finds them with ct (recorded) or
// without (read byte by byte).
func children(ct *containers, v []byte) []string {
	var out []string
	if v[0] == '{' {
		m := newMembers(ct, v)
		for {
			k, start, end, ok := m.next()
			if !ok {
				return out
			}
			out = append(out, string(k), string(v[start:end]))
		}
	}
	e := newElements(ct, v)
	for {
		start, end, ok := e.next()
		if !ok {
			return out
		}
		out = append(out, string(v[start:end]))
	}
}

// TestRecordIsBounded: a body of tiny values fills the record before its
// end; the record stays within its bound, and events past that point are
// still checked, read byte by byte.
func TestRecordIsBounded(t *testing.T) {
	bad := rr(`{"request":{"intentId":7},"response":{"displays":[{"items":[{"title":"ok"},{"token":[]}]}]}}`)
	body := []byte(`{"events":[{"type":"X","name":"pad","pad":[` + strings.Repeat("0,", 20000) + `0]},` +
		rr(`{"request":{},"response":{}}`) + `,` + bad + `]}`)
	var ct containers
	if _, err := scanLayout(body, nil, &ct); err != nil {
		t.Fatal(err)
	}
	if size := 24*len(ct.elems) + 16*len(ct.conts); size > 2*len(body) {
		t.Errorf("record of %d bytes for a body of %d", size, len(body))
	}
	if ct.conts[len(ct.conts)-1].after >= 0 {
		t.Fatal("the record did not fill up; the test does not test the fallback")
	}
	res, err := NewValidator(Limits{}).ProcessBatch(body, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldError{
		{Index: 2, Field: "payload.request.intentId", Reason: ReasonWrongType, Message: "must be a string or null, got number"},
		{Index: 2, Field: "payload.response.displays[0].items[1].token", Reason: ReasonWrongType, Message: "must be a string or null, got array"},
	}
	if len(res.Accepted) != 2 || !slices.Equal(res.Errors, want) {
		t.Errorf("accepted %d, errors %+v; want 2 and %+v", len(res.Accepted), res.Errors, want)
	}
}
