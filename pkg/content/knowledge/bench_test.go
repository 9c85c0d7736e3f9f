package knowledge

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
)

func TestGrow(t *testing.T) {
	docs := evalRecords(t)[content.KindDocument]
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

// knowledgeBase10k is the evaluation corpus grown to 10,000 documents
// and 1,000 FAQs, as the knowledge suite of dev/apibench serves, with
// WordNet as the api reads it.
func knowledgeBase10k(b *testing.B) (*Base, []Question) {
	src, o := sources10k(b)
	base, err := New(src, o)
	if err != nil {
		b.Fatal(err)
	}
	return base, evalQuestions(b)
}

func sources10k(b *testing.B) (Sources, Options) {
	byKind := evalRecords(b)
	docs, err := Grow(byKind[content.KindDocument], 10_000, "document", 1)
	if err != nil {
		b.Fatal(err)
	}
	faqs, err := Grow(byKind[content.KindFAQ], 1_000, "answer", 2)
	if err != nil {
		b.Fatal(err)
	}
	return Sources{Documents: docs, FAQs: faqs, Intents: byKind[content.KindIntent]}, Options{Lexicon: wordNet(b)}
}

// BenchmarkBuild10k is the build of the base of 10,000 documents and
// 1,000 FAQs: what an app's first question after a change waits for.
func BenchmarkBuild10k(b *testing.B) {
	src, o := sources10k(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := New(src, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch10k is one search and its answer's encoding, over the
// labelled search questions in turn.
func BenchmarkSearch10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	var questions []string
	for _, q := range qs {
		if q.Target == "search" {
			questions = append(questions, q.Question)
		}
	}
	var buf []byte
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		buf = base.Search(questions[i%len(questions)], "").AppendJSON(buf[:0])
	}
}

// BenchmarkSuggest10k is one suggestion for the first half of each
// labelled question in turn.
func BenchmarkSuggest10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	var prefixes []string
	for _, q := range qs {
		r := []rune(q.Question)
		prefixes = append(prefixes, string(r[:int(math.Ceil(float64(len(r))/2))]))
	}
	all := map[string]bool{KindIntent: true, KindFAQ: true, KindHistorical: true}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		base.Suggest(prefixes[i%len(prefixes)], all, nil, 5)
	}
}

// BenchmarkFAQs10k is one FAQ query of ten answers, total included, over
// the labelled questions in turn.
func BenchmarkFAQs10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		base.FAQs(qs[i%len(qs)].Question, 10)
	}
}
