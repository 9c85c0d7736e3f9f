package contentdb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/searcheval"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// TestSearchQualityMatchesSQLite runs the labelled search, FAQ and
// suggestion evaluation on content read back from PostgreSQL and from
// SQLite. The index is built in the api from the store's records, so the
// figures must agree; a backend that loses or reorders what it stores
// would move them.
func TestSearchQualityMatchesSQLite(t *testing.T) {
	ctx := context.Background()
	file, err := bundle.ReadFile("../knowledge/testdata/eval/content.json")
	if err != nil {
		t.Fatal(err)
	}
	questions, err := searcheval.ReadQuestions("../knowledge/testdata/eval/questions.json")
	if err != nil {
		t.Fatal(err)
	}
	pg, _ := openFresh(t)
	lite, err := OpenDB(ctx, filepath.Join(t.TempDir(), "cms.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()

	evaluate := func(name string, st content.Store) searcheval.Evaluation {
		t.Helper()
		if _, err := st.Import(contenttest.Acting(ctx), &file.Bundle, nil); err != nil {
			t.Fatalf("%s: import: %v", name, err)
		}
		lists := map[content.Kind][]content.Record{}
		for _, app := range file.Bundle.Apps {
			for _, k := range []content.Kind{content.KindDocument, content.KindFAQ, content.KindIntent} {
				recs, err := st.ListRecords(ctx, app.ID, k)
				if err != nil {
					t.Fatalf("%s: list %s: %v", name, k, err)
				}
				lists[k] = append(lists[k], recs...)
			}
		}
		b, err := knowledge.Build(lists[content.KindDocument], lists[content.KindFAQ], lists[content.KindIntent])
		if err != nil {
			t.Fatalf("%s: build: %v", name, err)
		}
		ev, err := searcheval.Evaluate(context.Background(), b, questions)
		if err != nil {
			t.Fatalf("%s: evaluate: %v", name, err)
		}
		t.Logf("%s: search MRR %.3f nDCG@5 %.3f; FAQ MRR %.3f nDCG@5 %.3f; suggestion hit rate@5 %.3f",
			name, ev.Search.MRR, ev.Search.NDCG5, ev.FAQ.MRR, ev.FAQ.NDCG5, ev.SuggestionHitRate)
		return ev
	}
	want, got := evaluate("SQLite", lite), evaluate("PostgreSQL", pg)
	for _, m := range []struct {
		name      string
		got, want float64
	}{
		{"search MRR", got.Search.MRR, want.Search.MRR},
		{"search nDCG@5", got.Search.NDCG5, want.Search.NDCG5},
		{"FAQ MRR", got.FAQ.MRR, want.FAQ.MRR},
		{"FAQ nDCG@5", got.FAQ.NDCG5, want.FAQ.NDCG5},
		{"suggestion hit rate@5", got.SuggestionHitRate, want.SuggestionHitRate},
	} {
		// The issue allows 0.05; the same records give the same index, so
		// anything but equality means a backend lost or changed content.
		if m.got != m.want || m.want <= 0 {
			t.Errorf("%s on PostgreSQL %.3f, on SQLite %.3f: want the same figure, above zero", m.name, m.got, m.want)
		}
	}
}
