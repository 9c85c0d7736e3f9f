package textcorpus

import (
	"encoding/json"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
)

// documents are the evaluation corpus's documents.
func documents(t *testing.T) []content.Record {
	t.Helper()
	file, err := bundle.ReadFile("../../pkg/content/knowledge/testdata/eval/content.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []content.Record
	for _, r := range file.Bundle.Records {
		if r.Kind == content.KindDocument {
			docs = append(docs, r)
		}
	}
	return docs
}

func TestGrow(t *testing.T) {
	docs := documents(t)
	a, err := Grow(docs, 1000, "document", 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Grow(docs, 1000, "document", 1)
	if len(a) != 1000 {
		t.Fatalf("%d records, want 1000", len(a))
	}
	ids, texts := map[string]bool{}, map[string]bool{}
	for i, r := range a {
		var f struct{ ID, Document string }
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			t.Fatal(err)
		}
		if f.ID != r.ID || ids[r.ID] || string(b[i].Doc) != string(r.Doc) {
			t.Fatalf("record %d: id %q in a document with id %q; repeated %v; same seed, same record %v", i, r.ID, f.ID, ids[r.ID], string(b[i].Doc) == string(r.Doc))
		}
		ids[r.ID], texts[f.Document] = true, true
	}
	if len(texts) < 990 {
		t.Errorf("%d distinct texts of 1000", len(texts))
	}
	if _, err := Grow(nil, 10, "document", 1); err == nil {
		t.Error("growing nothing must fail")
	}
}
