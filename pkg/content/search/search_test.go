package search

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	toks := tokens("Élan’s e-bike: 2 Batteries! 😀 don't")
	var got []string
	for _, tk := range toks {
		got = append(got, tk.word+"/"+tk.term)
	}
	if want := "elans/elan e/e bike/bike 2/2 batteries/batteri dont/dont ebike/ebik"; strings.Join(got, " ") != want {
		t.Errorf("tokens %q, want %q", strings.Join(got, " "), want)
	}
	// Offsets are UTF-16 code units: the emoji counts two.
	last := toks[len(toks)-2]
	if last.start != 31 || last.end != 36 {
		t.Errorf("offsets of %q: %d-%d", last.word, last.start, last.end)
	}
}

func TestDamerau1(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"puncture", "puncture", true}, {"punctre", "puncture", true}, {"puncture", "punctures", true},
		{"puncutre", "puncture", true}, {"punctore", "puncture", true}, {"pncutre", "puncture", false},
		{"tubless", "tubeless", true}, {"warrenty", "warranty", true}, {"abc", "abcde", false}, {"ab", "ba", true},
	} {
		if got := damerau1(tt.a, tt.b); got != tt.want {
			t.Errorf("damerau1(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

var corpus = []Doc{
	{ID: "puncture", Title: "How to fix a puncture", Body: "Remove the wheel. Find the hole in the inner tube.\n\nPatch the tube or fit a new one, then inflate the tyre to the pressure on its sidewall."},
	{ID: "tubeless", Title: "Setting up tubeless tyres", Body: "Tubeless tyres seal small punctures with sealant. Add 60 ml of sealant per tyre and seat the bead."},
	{ID: "hours-downtown", Title: "Downtown store", Body: "Our downtown store opens at 9 am on weekdays.", Location: "downtown"},
	{ID: "hours-riverside", Title: "Riverside store", Body: "The riverside store opens at 10 am on weekdays and has free parking.", Location: "riverside"},
	{ID: "battery", Title: "E-bike battery care", Body: "Store the battery at half charge in winter. Keep batteries away from frost."},
}

func ids(rs []Result) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Doc.ID)
	}
	return strings.Join(out, ",")
}

func TestSearch(t *testing.T) {
	ix := Build(corpus)
	for _, tt := range []struct {
		q, location, want string
	}{
		{"fix a puncture", "", "puncture,tubeless"},
		{"punctre", "", "puncture,tubeless"},                  // one typo
		{"tubless sealant", "", "tubeless"},                   // typo in a rarer word
		{"ebike batt", "", "battery"},                         // unfinished word
		{"batt please", "", "battery"},                        // a word cut short before the end
		{"BATTERIES in Winter", "", "battery"},                // case, stemming
		{"store opening hours", "downtown", "hours-downtown"}, // location filter
		{"parking", "downtown", ""},
		{"", "", ""},
	} {
		got := ids(ix.Search(tt.q, Options{Location: tt.location}))
		if !strings.HasPrefix(got, tt.want) || (tt.want == "" && got != "") {
			t.Errorf("Search(%q, %q) = %q, want it to start with %q", tt.q, tt.location, got, tt.want)
		}
	}
	r := ix.Search("fix a puncture", Options{})
	if r[0].Confidence != 1 || r[1].Confidence >= 1 || r[1].Confidence <= 0 {
		t.Errorf("confidences %v %v", r[0].Confidence, r[1].Confidence)
	}
}

func TestGroups(t *testing.T) {
	ix := Build([]Doc{
		{ID: "q1", Group: "returns", Title: "Can I return a bike?"},
		{ID: "q2", Group: "returns", Title: "What is your return policy?"},
		{ID: "q3", Group: "hours", Title: "When do you open?"},
	})
	if got := ids(ix.Search("return policy", Options{})); got != "q2" {
		t.Errorf("groups: %q, want the best variant once", got)
	}
}

// TestSearchCount counts every matching group, and ranks the first ones
// as a search of every match would.
func TestSearchCount(t *testing.T) {
	ix := Build([]Doc{
		{ID: "q1", Group: "returns", Title: "Can I return a bike?"},
		{ID: "q2", Group: "returns", Title: "What is your return policy?"},
		{ID: "q3", Group: "bikes", Title: "Which bike fits me?"},
		{ID: "q4", Group: "bike-hire", Title: "Can I hire a bike for a day?"},
		{ID: "q5", Group: "hours", Title: "When do you open?"},
	})
	for _, tc := range []struct {
		q     string
		limit int
		count int
	}{
		{"bike", 1, 3},
		{"bike", 2, 3},
		// "bike" is in most items, so beside a rarer word it is left out.
		{"return bike", 1, 1},
		{"open", 5, 1},
		{"zebra", 3, 0},
	} {
		res, n := ix.SearchCount(tc.q, Options{Limit: tc.limit})
		all := ix.Search(tc.q, Options{Limit: 100})
		if n != tc.count || n != len(all) {
			t.Errorf("%q: counted %d, want %d (a search of every match finds %d)", tc.q, n, tc.count, len(all))
		}
		if want := ids(all[:min(tc.limit, len(all))]); ids(res) != want {
			t.Errorf("%q, limit %d: %q, want %q", tc.q, tc.limit, ids(res), want)
		}
	}
}

func TestHighlightsAndPassages(t *testing.T) {
	ix := Build(corpus)
	rs := ix.Search("inflate tyre pressure", Options{})
	if len(rs) == 0 || rs[0].Doc.ID != "puncture" {
		t.Fatalf("results %q", ids(rs))
	}
	body := rs[0].Doc.Body
	hs := ix.HighlightsIn(rs[0], 0, len(body))
	var words []string
	for _, h := range hs {
		words = append(words, body[h.Start:h.End]) // ASCII: UTF-16 offsets are byte offsets
	}
	if strings.Join(words, ",") != "inflate,tyre,pressure" {
		t.Errorf("highlights %v", words)
	}
	ps := ix.Passages("inflate tyre pressure", rs[:1], 3)
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Text, "Patch the tube") || body[ps[0].Start:ps[0].End] != ps[0].Text {
		t.Fatalf("passages %+v", ps)
	}
	if s := ps[0].Text[ps[0].Sentence.Start:ps[0].Sentence.End]; !strings.HasPrefix(s, "Patch the tube") {
		t.Errorf("best sentence %q", s)
	}
}

func TestSuggester(t *testing.T) {
	s := NewSuggester([]Candidate{
		{Text: "When do you open?", Kind: "FAQ", Answer: "At nine."},
		{Text: "where is my order", Kind: "HISTORICAL", Weight: 3},
		{Text: "where is the riverside store", Kind: "HISTORICAL", Weight: 9},
		{Text: "Opening hours", Kind: "INTENT"},
		{Text: "Café  opening times", Kind: "INTENT"},
	})
	texts := func(ss []Suggestion) string {
		var out []string
		for _, x := range ss {
			out = append(out, x.Text)
		}
		return strings.Join(out, "|")
	}
	for _, tt := range []struct {
		q     string
		kinds []string
		want  string
	}{
		{"where", nil, "where is the riverside store|where is my order"},      // by weight
		{"WHERE IS M", nil, "where is my order|where is the riverside store"}, // exact first, then one edit
		{"wehre is", nil, "where is the riverside store|where is my order"},   // transposed letters
		{"open", nil, "Opening hours|Café  opening times|When do you open?"},  // at the start first
		{"cafe op", nil, "Café  opening times"},
		{"open", []string{"INTENT"}, "Opening hours|Café  opening times"},
		{"opn", nil, ""}, // too short for an edit
		{"wher", nil, "where is the riverside store|where is my order"}, // "when" is one edit away, but four letters are too few
		{"  ", nil, ""},
	} {
		kinds := map[string]bool{}
		for _, k := range tt.kinds {
			kinds[k] = true
		}
		if got := texts(s.Match(tt.q, kinds, 5, true)); got != tt.want {
			t.Errorf("Match(%q, %v) = %q, want %q", tt.q, tt.kinds, got, tt.want)
		}
	}
	m := s.Match("cafe op", nil, 1, true)[0]
	if m.Bold != (Span{0, 8}) {
		t.Errorf("bold %+v, want 0-8 (UTF-16 units of %q)", m.Bold, "Café  op")
	}
}

func TestHyphenatedWords(t *testing.T) {
	ix := Build([]Doc{{ID: "e", Title: "E-bike battery care", Body: "Charge the e-bike battery."}, {ID: "b", Title: "Bike care"}})
	for _, q := range []string{"ebike battery", "e-bike battery", "e bike battery"} {
		if got := ids(ix.Search(q, Options{})); !strings.HasPrefix(got, "e") {
			t.Errorf("Search(%q) = %q", q, got)
		}
	}
	rs := ix.Search("ebike", Options{})
	if hs := ix.HighlightsIn(rs[0], 0, 100); len(hs) != 1 || hs[0] != (Span{11, 17}) { // in "Charge the e-bike battery."
		t.Errorf("highlights %v, want the hyphenated word once", hs)
	}
}

func TestOneEditPrefix(t *testing.T) {
	for _, tt := range []struct {
		q, text string
		n       int
		ok      bool
	}{
		{"where", "where is", 0, false}, // exact: not an edit
		{"wehre", "where is", 5, true},  // swapped
		{"whare", "where is", 5, true},  // replaced
		{"wher i", "where is", 7, true}, // a letter dropped from the typed text
		{"wheere", "where is", 5, true}, // a letter added
		{"wxxre", "where is", 0, false},
		{"where is my", "where", 0, false},
	} {
		n, ok := oneEditPrefix([]rune(tt.q), []rune(tt.text))
		if n != tt.n || ok != tt.ok {
			t.Errorf("oneEditPrefix(%q, %q) = %d, %v; want %d, %v", tt.q, tt.text, n, ok, tt.n, tt.ok)
		}
	}
}

// TestOneEditRangesFindAll checks the narrowing search for matches with
// one edit against checking every entry, on texts of few letters, where
// near misses abound.
func TestOneEditRangesFindAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	word := func() string {
		b := make([]byte, 2+rng.IntN(6))
		for i := range b {
			b[i] = "abcde"[rng.IntN(5)]
		}
		return string(b)
	}
	var cands []Candidate
	for range 400 {
		cands = append(cands, Candidate{Text: word() + " " + word() + " " + word(), Kind: "K"})
	}
	s := NewSuggester(cands)
	for range 300 {
		q := word() + word()[:1]
		if len(q) < minTypoRunes {
			q += word()
		}
		fq := []rune(q)
		want := map[string]bool{}
		for _, e := range s.byKind["K"] {
			if _, ok := oneEditPrefix(fq, e.text); ok || (len(e.text) >= len(fq) && slices.Equal(e.text[:len(fq)], fq)) {
				want[s.cands[e.cand].Text] = true
			}
		}
		got := map[string]bool{}
		for _, m := range s.Match(q, nil, math.MaxInt, true) {
			got[m.Text] = true
		}
		// Match leaves out edits at the first letter; so does want, but
		// only for its word-start entries' first letters.
		for text := range want {
			if !got[text] && hasEditAfterFirst(fq, s, text) {
				t.Errorf("%q: %q not matched", q, text)
			}
		}
		for text := range got {
			if !want[text] {
				t.Errorf("%q: %q matched, but no prefix of its words is one edit away", q, text)
			}
		}
	}
}

// hasEditAfterFirst reports whether a word start of text begins with
// q's first letter and has a prefix at most one edit from q.
func hasEditAfterFirst(q []rune, s *Suggester, text string) bool {
	for _, e := range s.byKind["K"] {
		if s.cands[e.cand].Text != text || len(e.text) == 0 || e.text[0] != q[0] {
			continue
		}
		if _, ok := oneEditPrefix(q, e.text); ok || (len(e.text) >= len(q) && slices.Equal(e.text[:len(q)], q)) {
			return true
		}
	}
	return false
}

func TestDeletesSkipsVeryLongWords(t *testing.T) {
	for _, tc := range []struct {
		word string
		want int
	}{
		{"abc", 0},
		{"abcd", 4},
		{strings.Repeat("é", maxTypoRunes), maxTypoRunes},
		{strings.Repeat("a", maxTypoRunes+1), 0},
		{strings.Repeat("a", 1000), 0},
	} {
		if got := len(deletes(tc.word)); got != tc.want {
			t.Errorf("deletes of a %d-rune word: %d, want %d", len([]rune(tc.word)), got, tc.want)
		}
	}
}

// TestTypoCollisionsMatchNothing: the typo table is keyed by hashes, so
// a deletion may name a term it is not a deletion of; such a term is
// never matched, as every candidate is checked.
func TestTypoCollisionsMatchNothing(t *testing.T) {
	ix := Build(corpus)
	if got := ids(ix.Search("zzzzz", Options{})); got != "" {
		t.Fatalf("zzzzz found %q before any collision", got)
	}
	id, ok := ix.termIDs["punctur"]
	if !ok {
		t.Fatal(`no term "punctur"`)
	}
	ix.typos[maphash.String(ix.typoSeed, "zzzz")] = id // as if "zzzz" hashed as a deletion of it
	if got := ids(ix.Search("zzzzz", Options{})); got != "" {
		t.Errorf("zzzzz found %q through a collision", got)
	}
	if got := ids(ix.Search("punctre", Options{})); !strings.HasPrefix(got, "puncture") {
		t.Errorf("punctre found %q, want puncture first", got)
	}
}
