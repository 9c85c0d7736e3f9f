package knowledge

import (
	"reflect"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
)

func TestSynonymSets(t *testing.T) {
	entity := rec(content.KindEntity, "Vehicle", `{"values":[{"name":"bicycle","synonyms":["bike","cycle"]},{"name":"scooter"}]}`)
	faqA := rec(content.KindFAQ, "a", `{"questions":["where is my parcel","where is my package"],"answer":"x"}`)
	faqB := rec(content.KindFAQ, "b", `{"questions":["pay by paypal","pay by klarna"],"answer":"x"}`)
	intent := rec(content.KindIntent, "Track", `{"utterancePatterns":["track my parcel {n}","track my package"]}`)
	for _, tc := range []struct {
		name                    string
		faqs, intents, entities []content.Record
		want                    [][]string
	}{
		{"nothing", nil, nil, nil, nil},
		{"entity values with synonyms", nil, nil, []content.Record{entity}, [][]string{{"bicycle", "bike", "cycle"}}},
		{"one FAQ's swap is not enough", []content.Record{faqA, faqB}, nil, nil, nil},
		{"swapped in two sources", []content.Record{faqA, faqB}, []content.Record{intent}, nil, [][]string{{"package", "parcel"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := synonymSets(tc.faqs, tc.intents, tc.entities)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("synonymSets = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBuildWithEntities(t *testing.T) {
	docs := []content.Record{rec(content.KindDocument, "sizing", `{"title":"Bicycle sizing","document":"Pick a frame by height."}`)}
	entities := []content.Record{rec(content.KindEntity, "Vehicle", `{"values":[{"name":"bicycle","synonyms":["bike"]}]}`)}
	for _, tc := range []struct {
		name     string
		entities []content.Record
		want     int
	}{
		{"synonym from an entity matches", entities, 1},
		{"no entities, no match", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Content{Documents: docs, Entities: tc.entities}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(b.Search("bike", "").Documents); got != tc.want {
				t.Errorf("%d documents, want %d", got, tc.want)
			}
		})
	}
}
