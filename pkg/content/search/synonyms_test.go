package search

import (
	"reflect"
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
			ix := BuildWithSynonyms(docs, tc.sets)
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
	ix := BuildWithSynonyms([]Doc{{ID: "a", Title: "bike"}}, [][]string{{"bike", "bicycle"}, {"tyre", "tire"}})
	if want := map[string][]string{"bicycl": {"bike"}}; !reflect.DeepEqual(ix.synonyms, want) {
		t.Errorf("synonyms %v, want %v", ix.synonyms, want)
	}
	if ix := Build([]Doc{{ID: "a", Title: "bike"}}); ix.synonyms != nil {
		t.Errorf("synonyms %v without sets", ix.synonyms)
	}
}
