package jsonscan

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestCheckAgreesWithStdlib(t *testing.T) {
	cases := []string{
		`{}`, `[]`, `1`, `-0`, `-0.5e+10`, `"x"`, `true`, `null`, ` {"a" : [1, 2.5, "x", {"b": null}] } `,
		`01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `NaN`, `Infinity`, `tru`, `nul`, `[1,]`, `{"a":1,}`, `{"a"}`,
		`{"a":1 "b":2}`, `[1 2]`, `{1:2}`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\ud800"`, "\"a\x01\"", "\"a\\n\x01\"",
		"\"tab\there\"", `"unterminated`, `[`, `{"a":`, `[1]]`, `{}{}`, "\x00", ``, ` `, `"\/\b\f\n\r\t\"\\"`,
		`{"events":[{"a":"` + strings.Repeat(`\"`, 10) + `"}]}`, `[1e5, 1E-5, 0.0, -12.34e+56]`,
	}
	for _, c := range cases {
		for _, x := range []*Index{nil, {}} {
			got := Check([]byte(c), x) == nil
			if want := json.Valid([]byte(c)); got != want {
				t.Errorf("%q (index %v): scanner says valid=%v, encoding/json says %v", c, x != nil, got, want)
			}
		}
	}
}

// FuzzScanAgreesWithStdlib checks the scanner against encoding/json on
// UTF-8 input within the depth limit, and checks the index and the spans
// it reports.
func FuzzScanAgreesWithStdlib(f *testing.F) {
	for _, s := range []string{`{"events":[{"a":1},2,"x"]}`, `[1,{"b":[true,null]}]`, `"\u00e9\n"`, `-1.5e3`, `{"events":[],"x":[[1],[2]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var x Index
		lay, err := ScanLayout(b, "events", nil, &x)
		if err != nil && strings.Contains(err.Error(), "deeper than") {
			return
		}
		if err == nil {
			checkIndex(t, b, &x)
		}
		if (err == nil) != json.Valid(b) {
			t.Fatalf("%q: scanner err=%v, encoding/json valid=%v", b, err, json.Valid(b))
		}
		if err != nil || lay.Escaped || lay.Value == nil || lay.Value[0] != '[' {
			return
		}
		spans := lay.Spans
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

// checkIndex checks that every recorded container ends where reading it
// byte by byte does, and holds the children reading it finds.
func checkIndex(t *testing.T, b []byte, x *Index) {
	t.Helper()
	for _, c := range x.conts {
		open := int(c.open)
		if got := SkipValue(nil, b, open); got != int(c.close) {
			t.Fatalf("%q: container at %d ends at %d, recorded %d", b, open, got, c.close)
		}
		if got := SkipValue(x, b[open:], 0); got != int(c.close)-open {
			t.Fatalf("%q: lookup from a sub-slice at %d gives %d", b, open, got)
		}
		if got, want := children(x, b[open:c.close]), children(nil, b[open:c.close]); !slices.Equal(got, want) {
			t.Fatalf("%q: container at %d has children %q recorded, %q read", b, open, got, want)
		}
	}
}

// children lists the keys and values of an object's members, or the
// elements of an array, as a walk finds them with x (recorded) or
// without (read byte by byte).
func children(x *Index, v []byte) []string {
	var out []string
	if v[0] == '{' {
		m := NewMembers(x, v)
		for {
			k, start, end, ok := m.Next()
			if !ok {
				return out
			}
			out = append(out, string(k), string(v[start:end]))
		}
	}
	e := NewElements(x, v)
	for {
		start, end, ok := e.Next()
		if !ok {
			return out
		}
		out = append(out, string(v[start:end]))
	}
}

// TestIndexIsBounded: a document of tiny values fills the record before
// its end; the record stays within its bound, and what it holds still
// agrees with reading byte by byte.
func TestIndexIsBounded(t *testing.T) {
	doc := []byte(`{"events":[{"pad":[` + strings.Repeat("0,", 20000) + `0]},{"a":{"b":[1,{"c":2}]}},[3,4]]}`)
	var x Index
	lay, err := ScanLayout(doc, "events", nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	if size := 24*len(x.elems) + 16*len(x.conts); size > 2*len(doc) {
		t.Errorf("record of %d bytes for a document of %d", size, len(doc))
	}
	if x.Complete() {
		t.Fatal("the record did not fill up; the test does not test the bound")
	}
	checkIndex(t, doc, &x)
	// The elements past the bound are found all the same.
	if got := children(&x, lay.Value); len(got) != 3 || got[2] != `[3,4]` {
		t.Errorf("elements %q", got)
	}
	small := []byte(`{"a":[1,2,{"b":3}]}`)
	if err := Check(small, &x); err != nil || !x.Complete() {
		t.Errorf("a small document: %v, complete %v", err, x.Complete())
	}
}

func TestCheckDepth(t *testing.T) {
	ok := `[[` + strings.Repeat(`{"a":[`, 63) + `1` + strings.Repeat(`]}`, 63) + `]]` // 128 levels
	deep := `[` + ok + `]`
	if err := Check([]byte(ok), nil); err != nil {
		t.Errorf("128 levels: %v", err)
	}
	if err := Check([]byte(deep), nil); err == nil || !strings.Contains(err.Error(), "deeper than 128 levels") {
		t.Errorf("129 levels: %v", err)
	}
}

func TestScanLayout(t *testing.T) {
	cases := []struct {
		doc     string
		count   int
		value   string
		spans   []string
		escaped bool
	}{
		{`{"items":[{"a":1},{"b":"}]"}]}`, 1, `[{"a":1},{"b":"}]"}]`, []string{`{"a":1}`, `{"b":"}]"}`}, false},
		{` { "x" : [1,{"items":[]}] , "items" : [ 1 , "s\"" ,null,[{}], {} ] } `, 1, `[ 1 , "s\"" ,null,[{}], {} ]`,
			[]string{`1`, `"s\""`, `null`, `[{}]`, `{}`}, false},
		{`{"items":[],"x":[[1],[2]]}`, 1, `[]`, nil, false},
		{`{"other":1}`, 0, ``, nil, false},
		{`{"items":{"a":[1]}}`, 1, `{"a":[1]}`, nil, false},
		{`[{"items":[1]}]`, 0, ``, nil, false},
		{`{"items":[1],"items":[2,3]}`, 2, `[1]`, []string{`1`}, false},
		{`{"a":"\\","items":[{"k":"\\\""}]}`, 1, `[{"k":"\\\""}]`, []string{`{"k":"\\\""}`}, false},
		// A key with escapes might spell the name: the caller must look.
		{`{"it\u0065ms":[{}]}`, 0, ``, nil, true},
	}
	for _, tc := range cases {
		lay, err := ScanLayout([]byte(tc.doc), "items", nil, &Index{})
		if err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		var spans []string
		for _, s := range lay.Spans {
			spans = append(spans, tc.doc[s[0]:s[1]])
		}
		if lay.Count != tc.count || string(lay.Value) != tc.value || !slices.Equal(spans, tc.spans) || lay.Escaped != tc.escaped {
			t.Errorf("%s: count %d value %q spans %q escaped %v; want %d %q %q %v",
				tc.doc, lay.Count, lay.Value, spans, lay.Escaped, tc.count, tc.value, tc.spans, tc.escaped)
		}
	}
}

// TestScanLayoutNamesTheElement: an error inside an element of the array
// says which, with the name the caller gave; one outside says nothing.
func TestScanLayoutNamesTheElement(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"items":[{},{"a":tru}]}`, "invalid literal at offset 18 (in items[1])"},
		{`{"items":[{} x]}`, "expected , or ] after an array element, found 'x' at offset 13"},
		{`{"items":[{}],"x":Infinity}`, "Infinity is not a JSON number at offset 18"},
	}
	for _, tc := range cases {
		if _, err := ScanLayout([]byte(tc.doc), "items", nil, &Index{}); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.doc, err, tc.want)
		}
	}
}
