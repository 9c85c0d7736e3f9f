package search

import (
	"reflect"
	"slices"
	"testing"
)

func TestSynonymTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets [][]string
		want map[string][]string
	}{
		{"none", nil, nil},
		{"entity value with synonyms", [][]string{{"bicycle", "bike", "cycle"}},
			map[string][]string{"bicycl": {"bike", "cycl"}, "bike": {"bicycl", "cycl"}, "cycl": {"bicycl", "bike"}}},
		{"stemmed and folded", [][]string{{"Tyres", "tires"}}, map[string][]string{"tyre": {"tire"}, "tire": {"tyre"}}},
		{"phrases and stop words left out", [][]string{{"e-bike", "electric bike", "the", "ebike"}}, nil},
		{"sets sharing a word merge", [][]string{{"bike", "bicycle"}, {"bike", "cycle"}},
			map[string][]string{"bicycl": {"bike"}, "bike": {"bicycl", "cycl"}, "cycl": {"bike"}}},
		{"a word alone is no set", [][]string{{"bike"}, {"bike", "bikes"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := synonymTable(tc.sets); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("synonymTable(%q) = %v, want %v", tc.sets, got, tc.want)
			}
		})
	}
}

func TestAlternatives(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts []string
		want  [][]string
	}{
		{"one word swapped", []string{"Where is my parcel?", "where is my package"}, [][]string{{"parcel", "package"}}},
		{"two words swapped", []string{"where is my parcel", "where was my package"}, nil},
		{"lengths differ", []string{"where is my parcel", "where is my order now"}, nil},
		{"stop word swapped", []string{"where is my parcel", "where is the parcel"}, nil},
		{"same stem", []string{"track my parcel", "track my parcels"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Alternatives(tc.texts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Alternatives(%q) = %q, want %q", tc.texts, got, tc.want)
			}
		})
	}
}

func TestSynonymExpansion(t *testing.T) {
	docs := []Doc{
		{ID: "bicycle", Title: "Bicycle sizing", Body: "Choose a bicycle frame by your height."},
		{ID: "bike", Title: "Bike sizing", Body: "Choose a bike frame by your height."},
		{ID: "other", Title: "Opening hours", Body: "We open at nine."},
	}
	sets := [][]string{{"bike", "bicycle"}}
	for _, tc := range []struct {
		name  string
		sets  [][]string
		query string
		want  []string
	}{
		{"exact match first, synonym after", sets, "bike", []string{"bike", "bicycle"}},
		{"the other way round", sets, "bicycle", []string{"bicycle", "bike"}},
		{"synonym with other words", sets, "bicycle height", []string{"bicycle", "bike"}},
		{"no sets, no expansion", nil, "bike", []string{"bike"}},
		{"unrelated query untouched", sets, "opening", []string{"other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := BuildWith(docs, Config{Synonyms: tc.sets})
			res := ix.Search(tc.query, Options{})
			var got []string
			for _, r := range res {
				got = append(got, r.Doc.ID)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Search(%q) = %q, want %q", tc.query, got, tc.want)
			}
			if len(res) > 1 && res[0].Score <= res[1].Score {
				t.Errorf("exact score %v not above synonym score %v", res[0].Score, res[1].Score)
			}
		})
	}
}

func TestSynonymsOnlyWhereIndexed(t *testing.T) {
	ix := BuildWith([]Doc{{ID: "a", Title: "bike"}}, Config{Synonyms: [][]string{{"bike", "bicycle"}, {"tyre", "tire"}}})
	if want := map[string][]string{"bicycl": {"bike"}}; !reflect.DeepEqual(ix.synonyms, want) {
		t.Errorf("synonyms %v, want %v", ix.synonyms, want)
	}
	if ix := Build([]Doc{{ID: "a", Title: "bike"}}); ix.synonyms != nil {
		t.Errorf("synonyms %v without sets", ix.synonyms)
	}
}

// fakeLexicon relates words as its map says, each at weight 1.
type fakeLexicon map[string][]string

func (l fakeLexicon) Related(word string, visit func(string, float64)) {
	for _, r := range l[word] {
		visit(r, 1)
	}
}

// TestLexiconExpansion: a related word matches with less weight than the
// word typed, only where no synonym of the app's own says more, and a
// phrase or a word no item holds adds nothing.
func TestLexiconExpansion(t *testing.T) {
	docs := []Doc{
		{ID: "coupon", Title: "Coupon rules"},
		{ID: "voucher", Title: "Voucher rules"},
		{ID: "other", Title: "Opening hours"},
	}
	lex := fakeLexicon{"voucher": {"coupon", "gift token", "discount"}, "coupons": {"voucher"}, "letter": {"e-mail"}}
	docs = append(docs, Doc{ID: "email", Title: "Our e-mail address"})
	for _, tc := range []struct {
		name, q string
		lex     Lexicon
		want    []string
	}{
		{"typed word first, related after", "voucher", lex, []string{"voucher", "coupon"}},
		{"inflected query word looked up as typed", "coupons", lex, []string{"coupon", "voucher"}},
		{"no lexicon, no related words", "voucher", nil, []string{"voucher"}},
		{"unrelated word", "hours", lex, []string{"other"}},
		{"hyphenated related word, indexed joined", "letter", lex, []string{"email"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := BuildWith(docs, Config{Lexicon: tc.lex})
			var got []string
			for _, r := range ix.Search(tc.q, Options{}) {
				got = append(got, r.Doc.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Search(%q) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	ix := BuildWith(docs, Config{Lexicon: lex})
	res := ix.Search("voucher", Options{})
	if len(res) != 2 || res[1].Score >= res[0].Score || res[1].Confidence > lexiconWeight+1e-9 {
		t.Errorf("a related word must count less than the word typed, at most %v of it: %+v", lexiconWeight, res)
	}
	if hl := ix.TitleHighlights(res[1]); len(hl) != 1 || hl[0] != (Span{0, 6}) {
		t.Errorf("title highlight of the related word: %+v", hl)
	}
}

func TestMeaningful(t *testing.T) {
	for q, want := range map[string]bool{
		"how do I":        false,
		"how do I ret":    false, // the last word may become anything
		"how do I return": false,
		"return a ":       true,
		"can I return a":  true,
		"":                false,
	} {
		if got := Meaningful(q); got != want {
			t.Errorf("Meaningful(%q) = %v, want %v", q, got, want)
		}
	}
}
