package knowledge

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAppendJSON holds the search answer's encoder to encoding/json's
// output, byte for byte.
func TestAppendJSON(t *testing.T) {
	check := func(name string, r SearchResult) {
		t.Helper()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	b, qs := evalSet(t)
	n := 0
	for _, q := range qs {
		for _, loc := range []string{"", "riverside"} {
			r := b.Search(q.Question, loc)
			n += len(r.Documents)
			check(q.Question, r)
		}
	}
	if n == 0 {
		t.Fatal("no documents found for the labelled questions")
	}
	for _, tt := range []struct {
		name string
		r    SearchResult
	}{
		{"empty", SearchResult{Documents: []Document{}, Suggested: []Suggested{}}},
		{"nil lists", SearchResult{}},
		{"escapes", SearchResult{
			Documents: []Document{{Title: `<b>"Tea" & 'cakes'</b>`, URI: "https://x.test/?a=1&b=2", Document: "line\nbreak\ttab \u2028 é 😀 \x01 \\", Attributes: map[string]string{"location": "z<", "a": "b"}}},
			Suggested: []Suggested{{Document: Document{Document: "x", Highlights: []Highlight{{0, 1, true}, {2, 3, false}}}, TopAnswer: "<x>", MatchConfidence: 0.125}},
		}},
		{"no title or uri", SearchResult{Documents: []Document{{Document: "only text", Highlights: []Highlight{}}}}},
		{"confidences", SearchResult{Suggested: []Suggested{{MatchConfidence: 0}, {MatchConfidence: 1}, {MatchConfidence: 1e-9}, {MatchConfidence: 1e22}, {MatchConfidence: -0.5}}}},
	} {
		check(tt.name, tt.r)
	}
	if got := appendFloat(nil, math.NaN()); string(got) != "" {
		t.Errorf("NaN encoded as %q; encoding/json refuses it", got)
	}
}
