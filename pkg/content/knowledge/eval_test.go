package knowledge

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
)

// TestEvaluationSet holds search and FAQ ranking to the quality goal on
// the labelled set: a change that makes answers worse fails here.
// go run ./dev/searcheval prints the full report.
func TestEvaluationSet(t *testing.T) {
	b, qs := evalSet(t)
	ev, err := b.Evaluate(qs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("search MRR %.3f nDCG@5 %.3f; FAQ MRR %.3f nDCG@5 %.3f; suggestion hit rate@5 %.3f",
		ev.Search.MRR, ev.Search.NDCG5, ev.FAQ.MRR, ev.FAQ.NDCG5, ev.SuggestionHitRate)
	const goal = 0.8
	if ev.Search.MRR < goal || ev.FAQ.MRR < goal {
		t.Errorf("MRR below %.1f: search %.3f, FAQ %.3f", goal, ev.Search.MRR, ev.FAQ.MRR)
	}
}

// evalSet builds the evaluation corpus's base and reads its labelled
// questions, checking the set's size.
func evalSet(t testing.TB) (*Base, []Question) {
	t.Helper()
	byKind := evalRecords(t)
	if len(byKind[content.KindDocument]) < 300 || len(byKind[content.KindFAQ]) < 100 {
		t.Fatalf("the corpus has %d documents and %d FAQs; the set needs at least 300 and 100", len(byKind[content.KindDocument]), len(byKind[content.KindFAQ]))
	}
	b, err := Build(byKind[content.KindDocument], byKind[content.KindFAQ], byKind[content.KindIntent])
	if err != nil {
		t.Fatal(err)
	}
	return b, evalQuestions(t)
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

func TestRank(t *testing.T) {
	for _, tt := range []struct {
		ranked, relevant []string
		rr, ndcg         float64
	}{
		{[]string{"a", "b"}, []string{"a"}, 1, 1},
		{[]string{"x", "a"}, []string{"a"}, 0.5, 0.6309},
		{[]string{"x", "y"}, []string{"a"}, 0, 0},
		{[]string{"a", "x", "b"}, []string{"a", "b"}, 1, (1 + 0.5) / (1 + 0.6309)},
	} {
		rr, ndcg := rank(tt.ranked, tt.relevant)
		if rr != tt.rr || ndcg < tt.ndcg-0.001 || ndcg > tt.ndcg+0.001 {
			t.Errorf("rank(%v, %v) = %.4f, %.4f; want %.4f, %.4f", tt.ranked, tt.relevant, rr, ndcg, tt.rr, tt.ndcg)
		}
	}
}
