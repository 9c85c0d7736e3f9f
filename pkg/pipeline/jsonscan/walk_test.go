package jsonscan

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestUnescape(t *testing.T) {
	cases := map[string]string{
		`plain`:               "plain",
		`a\"b\\c\/d`:          `a"b\c/d`,
		`\b\f\n\r\t`:          "\b\f\n\r\t",
		`\u00e9\u20AC`:        "é€",
		`\ud83d\ude00`:        "😀",
		`\ud83d`:              "\ufffd",
		`\ud83dx`:             "\ufffdx",
		`\ud83d\u0041`:        "\ufffdA",
		`\ude00\ud83d\ude00z`: "\ufffd😀z",
	}
	for in, want := range cases {
		if got := string(unescape(nil, []byte(in))); got != want {
			t.Errorf("unescape(%s) = %q, want %q", in, got, want)
		}
		var std string
		if err := json.Unmarshal([]byte(`"`+in+`"`), &std); err != nil || std != want {
			t.Errorf("encoding/json reads %s as %q (%v); the case is wrong", in, std, err)
		}
	}
}

// TestStringValueKeepsEarlierResults: decoded strings share the scratch
// space, which only grows, so each result stays what it was.
func TestStringValueKeepsEarlierResults(t *testing.T) {
	var scratch []byte
	a := StringValue([]byte(`"\u00e9t\u00e9"`), &scratch)
	b := StringValue([]byte(`"plain"`), &scratch)
	c := StringValue([]byte(`"a\nb"`), &scratch)
	if string(a) != "été" || string(b) != "plain" || string(c) != "a\nb" {
		t.Errorf("got %q %q %q", a, b, c)
	}
}

func TestWalkerFields(t *testing.T) {
	cases := []struct {
		obj  string
		want []string // values of a, b, c; "" when absent
		dup  string
	}{
		{`{"a":1,"b":"x","c":[1,{"a":2}]}`, []string{`1`, `"x"`, `[1,{"a":2}]`}, ""},
		{`{"c":null,"z":{"a":1}}`, []string{``, ``, `null`}, ""},
		{`{"\u0061":true,"b":{}}`, []string{`true`, `{}`, ``}, ""},
		{`{"a":1,"b":2,"a":3}`, []string{`3`, `2`, ``}, "a"},
		{`{"b":1,"\u0062":2}`, []string{``, `2`, ``}, "b"},
		{`{}`, []string{``, ``, ``}, ""},
	}
	for _, tc := range cases {
		for _, indexed := range []bool{false, true} {
			doc := []byte(tc.obj)
			var scratch []byte
			w := Walker{Scratch: &scratch}
			if indexed {
				w.Index = &Index{}
				if err := Check(doc, w.Index); err != nil {
					t.Fatal(err)
				}
			}
			var vals [3][]byte
			dup := w.Fields(doc, []string{"a", "b", "c"}, vals[:])
			got := []string{string(vals[0]), string(vals[1]), string(vals[2])}
			if dup != tc.dup || !slices.Equal(got, tc.want) {
				t.Errorf("%s (indexed %v): %q dup %q, want %q dup %q", tc.obj, indexed, got, dup, tc.want, tc.dup)
			}
		}
	}
}

func TestTypeName(t *testing.T) {
	for v, want := range map[string]string{`{}`: "object", `[]`: "array", `"s"`: "string", `true`: "boolean",
		`false`: "boolean", `null`: "null", `-1`: "number", `0.5`: "number"} {
		if got := TypeName([]byte(v)); got != want {
			t.Errorf("TypeName(%s) = %s, want %s", v, got, want)
		}
		if IsNumber([]byte(v)) != (want == "number") {
			t.Errorf("IsNumber(%s) = %v", v, !(want == "number"))
		}
	}
}
