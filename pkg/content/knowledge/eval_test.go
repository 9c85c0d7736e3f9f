package knowledge

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

// The labelled evaluation set in testdata/eval is measured by package
// internal/searcheval; the tests here search its content and questions.

// Question is a labelled question of the evaluation set, as far as the
// tests here read it.
type Question struct {
	Question string `json:"question"`
	// Target is "search" or "faq".
	Target string `json:"target"`
}

// evalSet builds the evaluation corpus's base and reads its labelled
// questions, checking the set's size.
func evalSet(t testing.TB) (*Base, []Question) {
	t.Helper()
	byKind := evalRecords(t)
	if len(byKind[content.KindDocument]) < 300 || len(byKind[content.KindFAQ]) < 100 {
		t.Fatalf("the corpus has %d documents and %d FAQs; the set needs at least 300 and 100", len(byKind[content.KindDocument]), len(byKind[content.KindFAQ]))
	}
	return evalBase(t, byKind, Options{Lexicon: wordNet(t)}), evalQuestions(t)
}

// evalBase builds the evaluation corpus's base as the api does.
func evalBase(t testing.TB, byKind map[content.Kind][]content.Record, o Options) *Base {
	t.Helper()
	b, err := New(Content{Documents: byKind[content.KindDocument], FAQs: byKind[content.KindFAQ], Intents: byKind[content.KindIntent], Entities: byKind[content.KindEntity]}, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wordNet loads the WordNet database the api reads by default.
func wordNet(t testing.TB) *lexicon.WordNet {
	t.Helper()
	wn, err := lexicon.Load(lexicon.DefaultDir)
	if err != nil {
		t.Fatalf("%v (install Debian's wordnet-base, as go run ./dev/test does)", err)
	}
	return wn
}

// evalRecords reads the evaluation corpus's records by kind.
func evalRecords(t testing.TB) map[content.Kind][]content.Record {
	t.Helper()
	f, err := os.Open("testdata/eval/content.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, err := bundle.Read(f, bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[content.Kind][]content.Record{}
	for _, r := range file.Bundle.Records {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	return byKind
}

// evalQuestions reads the labelled questions.
func evalQuestions(t testing.TB) []Question {
	t.Helper()
	raw, err := os.ReadFile("testdata/eval/questions.json")
	if err != nil {
		t.Fatal(err)
	}
	var qs []Question
	if err := json.Unmarshal(raw, &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) < 60 {
		t.Fatalf("%d labelled questions; the set needs at least 60", len(qs))
	}
	return qs
}

// The external tests of the package see these through knowledge.

// EvalBase is the evaluation corpus's base as the api builds it, with
// WordNet and o's other options.
func EvalBase(t testing.TB, o Options) *Base {
	t.Helper()
	o.Lexicon = wordNet(t)
	return evalBase(t, evalRecords(t), o)
}

// EstimateDocuments makes b's rankings by meaning measure only the n
// documents nearest by estimate, as on large content, however few
// documents b has.
func EstimateDocuments(b *Base, n int) error {
	if b.sem == nil {
		return errors.New("no embedder")
	}
	index, err := b.sem.vectors()
	if err != nil {
		return err
	}
	index.exact, index.candidates = 0, n
	return nil
}
